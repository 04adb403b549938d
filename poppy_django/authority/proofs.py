"""The DPoP proof of a token request (RFC 9449 §4-5): the key the new token is bound to.

At the token endpoint a proof names ``POST`` and the token endpoint's public URL, carries no
``ath`` (there is no token yet), is fresh, signed by the public ``jwk`` in its header and
used once, and carries a current server nonce when ``POPPY["TOKENS"]["REQUIRE_NONCE"]`` asks
for them (else ``use_dpop_nonce`` with a ``DPoP-Nonce`` header, which agents retry with).
Its key's RFC 7638 thumbprint becomes the token's ``cnf.jkt``.
"""

from __future__ import annotations

import time
from typing import Any

import jwt

from poppy_django.authority.conf import authority_settings
from poppy_django.authority.errors import InvalidDPoPProofError, UseDPoPNonceError
from poppy_django.conf import poppy_settings
from poppy_django.verifier import nonces, replay
from poppy_django.verifier.jwk import JWKError, public_key_for, thumbprint
from poppy_django.verifier.proof import normalize_htu

PROOF_TYPE = "dpop+jwt"


def _refuse() -> InvalidDPoPProofError:
    return InvalidDPoPProofError("The DPoP proof is missing or not valid for this request.")


def verify_token_request_proof(proof: Any, url: str, *, now: float | None = None) -> str:
    """The thumbprint of a valid proof's key; else 400 ``invalid_dpop_proof``."""
    now = time.time() if now is None else now
    options = authority_settings()
    # One proof: a header sent twice arrives joined with a comma, which no JWS contains.
    if not isinstance(proof, str) or not proof or len(proof) > 8192 or "," in proof:
        raise _refuse()
    try:
        header = jwt.get_unverified_header(proof)
    except jwt.InvalidTokenError:
        raise _refuse() from None
    alg = header.get("alg")
    token_options = poppy_settings.token_options
    allowed = token_options.dpop_algorithms
    if str(header.get("typ", "")).lower() != PROOF_TYPE or alg not in allowed:
        raise _refuse()
    jwk = header.get("jwk")
    try:
        key = public_key_for(jwk, str(alg))
        assert isinstance(jwk, dict)  # public_key_for accepted it as an object
        jkt = thumbprint(jwk)
    except JWKError:
        raise _refuse() from None
    try:
        claims = jwt.decode(
            proof,
            key,
            algorithms=[str(alg)],
            options={"verify_aud": False, "verify_exp": False, "verify_iat": False},
        )
    except jwt.InvalidTokenError:
        raise _refuse() from None
    leeway = float(options.LEEWAY_SECONDS)
    iat, jti, htu = claims.get("iat"), claims.get("jti"), claims.get("htu")
    if claims.get("htm") != "POST" or "ath" in claims:
        raise _refuse()
    try:
        if not isinstance(htu, str) or normalize_htu(htu) != normalize_htu(url):
            raise _refuse()
    except ValueError:
        raise _refuse() from None
    if not isinstance(iat, int | float) or isinstance(iat, bool):
        raise _refuse()
    max_age = float(options.PROOF_MAX_AGE_SECONDS)
    if not now - max_age - leeway <= iat <= now + leeway:
        raise _refuse()
    if not isinstance(jti, str) or not 0 < len(jti) <= 256:
        raise _refuse()
    # Server nonces, as the resource verifier asks for them (POPPY["TOKENS"]["REQUIRE_NONCE"]).
    lifetime, secret = token_options.nonce_lifetime, token_options.nonce_secret
    if token_options.require_nonce and not nonces.is_valid(
        claims.get("nonce"), now, lifetime=lifetime, secret=secret
    ):
        raise UseDPoPNonceError(nonces.issue(now, lifetime=lifetime, secret=secret))
    if not replay.first_use(jkt, jti, ttl=max_age + 2 * leeway, alias=str(options.REPLAY_CACHE)):
        raise _refuse()
    return jkt
