"""The DPoP proof (RFC 9449): its header (``typ``, an allowed ``alg``, a public ``jwk`` that
fits it) and its claims (``htm``, ``htu``, ``iat``, ``ath``, a fresh ``jti``, the server
nonce when required), checked against one request.
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlsplit

import jwt

from poppy_django.token_options import TokenOptions
from poppy_django.verifier import nonces
from poppy_django.verifier.caches import ProofKey
from poppy_django.verifier.claims import (
    MAX_JTI_LENGTH,
    Refused,
    all_finite,
    jws_header,
    number,
    same,
    string,
)
from poppy_django.verifier.jwk import JWKError, b64url, public_key_for, thumbprint
from poppy_django.verifier.principal import RequestInfo

PROOF_TYPE = "dpop+jwt"
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: pyjwt checks the signature only: time claims are ours (see the module docstring).
_PROOF_OPTIONS: Any = {
    "verify_exp": False,
    "verify_nbf": False,
    "verify_iat": False,
    "verify_aud": False,
    "verify_iss": False,
    "verify_sub": False,
    "verify_jti": False,
}


def normalize_htu(url: str) -> str:
    """An http(s) URL reduced for ``htu`` comparison (RFC 9449 §4.3, RFC 3986 §6.2.2-3)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError("not an http(s) URL")
    port = parts.port  # raises ValueError for a malformed port
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path or '/'}"


def proof_key(options: TokenOptions, proof: str) -> ProofKey:
    """The header checks: ``typ``, an allowed ``alg``, no extensions, a public ``jwk``
    that fits the ``alg``; then its thumbprint."""
    header = jws_header(proof, "invalid_dpop_proof", "proof")
    typ = header.get("typ")
    if not isinstance(typ, str) or typ.lower() != PROOF_TYPE:
        raise Refused("invalid_dpop_proof", "proof typ is not dpop+jwt")
    alg = header.get("alg")
    if alg not in options.dpop_algorithms:
        raise Refused("invalid_dpop_proof", "proof alg not allowed")
    if "crit" in header or "b64" in header:
        raise Refused("invalid_dpop_proof", "proof has critical extensions")
    jwk = header.get("jwk")
    try:
        key = public_key_for(jwk, str(alg))
        assert isinstance(jwk, dict)  # public_key_for checked it is a mapping
        return ProofKey(str(alg), key, thumbprint(jwk))
    except JWKError as exc:
        raise Refused("invalid_dpop_proof", f"proof jwk: {exc}") from None


def check_proof(
    options: TokenOptions,
    proof: str,
    proof_key: ProofKey,
    token: str,
    request: RequestInfo,
    now: float,
) -> dict[str, Any]:
    """The proof's signature by its header's key (pyjwt: its one parse of the proof when
    the header was remembered) and its claims."""
    try:
        claims = jwt.decode(
            proof, proof_key.key, algorithms=[proof_key.alg], options=_PROOF_OPTIONS
        )
    except (jwt.InvalidTokenError, RecursionError) as exc:
        raise Refused("invalid_dpop_proof", f"proof: {type(exc).__name__}") from None
    if not all_finite(claims):
        raise Refused("invalid_dpop_proof", "a proof claim is NaN or Infinity")
    jti = string(claims.get("jti"), "invalid_dpop_proof", "jti", max_length=MAX_JTI_LENGTH)
    claims["jti"] = jti
    if claims.get("htm") != request["method"].upper():
        raise Refused("invalid_dpop_proof", "htm does not match the method")
    htu = claims.get("htu")
    try:
        expected = normalize_htu(request["url"])
        if not isinstance(htu, str) or normalize_htu(htu) != expected:
            # The URL this server is at is public, and a wrong POPPY["BASE_URL"] (or a
            # proxy's missing headers) is the usual cause: say which URL was expected.
            raise Refused(
                "invalid_dpop_proof",
                f"htu does not match the URL: this server expected {expected} (its public "
                'URL: POPPY["BASE_URL"], else the request\'s host and scheme)',
                told=True,
            )
    except ValueError:
        raise Refused("invalid_dpop_proof", "htu is not an http(s) URL") from None
    iat = claims.get("iat")
    if not number(iat):
        raise Refused("invalid_dpop_proof", "iat missing or not a finite number")
    if iat > now + options.leeway:
        raise Refused("invalid_dpop_proof", "iat in the future")
    if iat < now - options.proof_max_age - options.leeway:
        raise Refused("invalid_dpop_proof", "iat too old")
    ath = b64url(hashlib.sha256(token.encode()).digest())
    if not same(claims.get("ath"), ath):
        raise Refused("invalid_dpop_proof", "ath is not the token's hash")
    if options.require_nonce and not nonces.is_valid(
        claims.get("nonce"),
        now,
        lifetime=options.nonce_lifetime,
        secret=options.nonce_secret,
    ):
        raise Refused("use_dpop_nonce", "nonce missing or stale")
    return claims
