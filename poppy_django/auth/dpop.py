"""The default verifier: DPoP-bound JWT Session Tokens (RFC 9449, RFC 7638, RFC 6750).

``POPPY = {"AUTHENTICATE": "poppy_django.auth.dpop.verify", "ISSUER": ..., "TOKENS": {...}}``
(sub-keys in :mod:`poppy_django.auth.options`). A request is accepted only when:

- ``Authorization: DPoP <token>`` (a Bearer token is refused: a DPoP-bound token sent as
  Bearer could be a stolen one) and one ``DPoP`` proof, both within their size limits;
- the proof: ``typ`` ``dpop+jwt``, an allowed asymmetric ``alg``, a public ``jwk`` that fits
  it, a valid signature, ``htm`` = the method, ``htu`` = the public URL (query and fragment
  ignored, scheme/host/port normalized), ``iat`` in the window, ``ath`` = the token's hash,
  a current server nonce when ``REQUIRE_NONCE``, and a ``jti`` never seen before;
- the token: an allowed ``alg``, signed by an issuer key (by ``kid``), ``iss`` = the issuer,
  ``aud`` naming the endpoint, ``exp``/``nbf``/``iat`` within leeway, ``cnf.jkt`` = the
  proof key's thumbprint, and a client id and User.

Every refusal carries a fixed description per error code: which check failed is logged at
DEBUG level (never the token or the proof), not told to the caller.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from jwt.algorithms import get_default_algorithms

from poppy_django import addresses
from poppy_django.auth import nonces, replay
from poppy_django.auth.jwk import JWKError, PublicKey, b64url, public_key_for, thumbprint
from poppy_django.auth.jwks import KeySource, RemoteKeys, StaticKeys
from poppy_django.auth.options import ASYMMETRIC_ALGORITHMS, TokenOptions
from poppy_django.auth.principal import AuthRefusal, Principal, RequestInfo
from poppy_django.conf import poppy_settings

logger = logging.getLogger("poppy_django.auth")

#: The description of each refusal: the same whichever check failed.
DESCRIPTIONS = {
    "invalid_token": "The access token is missing, malformed, expired or not for this resource.",
    "invalid_dpop_proof": "The DPoP proof is missing or not valid for this request.",
    "use_dpop_nonce": "Sign the DPoP proof with the nonce in the DPoP-Nonce header.",
    "sign_in_required": "The User must sign in for this request.",
    "insufficient_scope": "The token lacks a scope this request requires.",
}
PROOF_TYPE = "dpop+jwt"
#: A compact JWS: three base64url segments (an empty payload is not a JWT).
_JWS_RE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: Claim values longer than these are refused rather than stored.
MAX_ID_LENGTH = 512
MAX_JTI_LENGTH = 256

#: pyjwt's implementations of the asymmetric algorithms (never none or HMAC).
_ALGORITHMS = {
    name: algorithm
    for name, algorithm in get_default_algorithms().items()
    if name in ASYMMETRIC_ALGORITHMS
}


class _Refused(Exception):
    """Internal: a failed check, with a reason for the debug log only."""

    def __init__(self, code: str, reason: str, *, scope: str | None = None) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.scope = scope


def _b64decode(segment: str) -> bytes:
    """Unpadded base64url (the alphabet was checked by the JWS pattern)."""
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _segment(segment: str) -> dict[str, Any]:
    """A base64url JSON object segment of a JWS (strict: no padding, an object)."""
    value = json.loads(_b64decode(segment))
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


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


def _claim(claims: Mapping[str, Any], dotted: str) -> Any:
    value: Any = claims
    for name in dotted.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(name)
    return value


def _string(value: Any, code: str, what: str, *, max_length: int = MAX_ID_LENGTH) -> str:
    if not isinstance(value, str) or not value or len(value) > max_length:
        raise _Refused(code, f"{what} is missing or not a string")
    return value


class DPoPVerifier:
    """The verifier for one configuration; :func:`verify` keeps one per settings version."""

    def __init__(
        self,
        options: TokenOptions,
        *,
        issuer: str,
        keys: KeySource,
        path: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.options = options
        self.issuer = issuer
        self.keys = keys
        self.path = path.strip("/")
        self.clock = clock
        self.algs_param = " ".join(options.dpop_algorithms)

    # -- the contract ----------------------------------------------------------------------

    def __call__(self, request: RequestInfo) -> Principal:
        try:
            return self._verify(request, self.clock())
        except _Refused as refused:
            logger.debug("Refused a Poppy request (%s): %s", refused.code, refused.reason)
            raise self.refusal(refused.code, scope=refused.scope) from None

    def refusal(self, code: str, *, scope: str | None = None) -> AuthRefusal:
        """The :class:`AuthRefusal` for ``code``: WWW-Authenticate with algs, nonce if asked."""
        challenge = f'DPoP error="{code}"'
        if scope:
            challenge += f', scope="{scope}"'
        challenge += f', algs="{self.algs_param}"'
        headers: dict[str, str] = {}
        if code == "use_dpop_nonce" or self.options.require_nonce:
            headers["DPoP-Nonce"] = self.current_nonce()
        return AuthRefusal(code, DESCRIPTIONS[code], www_authenticate=challenge, headers=headers)

    def current_nonce(self) -> str:
        """The nonce a client should use now (for a ``DPoP-Nonce`` header)."""
        return nonces.issue(
            self.clock(), lifetime=self.options.nonce_lifetime, secret=self.options.nonce_secret
        )

    # -- the checks ------------------------------------------------------------------------

    def _verify(self, request: RequestInfo, now: float) -> Principal:
        headers = request["headers"]
        token = self._token_from(headers.get("authorization"))
        proof = headers.get("dpop")
        if not isinstance(proof, str) or not proof:
            raise _Refused("invalid_dpop_proof", "no DPoP header")
        if len(proof) > self.options.max_proof_bytes:
            raise _Refused("invalid_dpop_proof", "DPoP header too large")
        jwk, proof_claims = self._check_proof(proof, token, request, now)
        claims = self._check_token(token, request["url"], now)
        jkt = _claim(claims, self.options.claims["jkt"])
        if not isinstance(jkt, str) or not hmac.compare_digest(jkt, thumbprint(jwk)):
            raise _Refused("invalid_dpop_proof", "proof key is not the token's cnf.jkt")
        principal = self._principal(claims, request["url"])
        self._check_scope(principal)
        # Last: only a request that passed every other check spends its jti.
        if not replay.first_use(
            jkt,
            proof_claims["jti"],
            ttl=self.options.replay_ttl,
            alias=self.options.replay_cache,
        ):
            raise _Refused("invalid_dpop_proof", "jti replayed")
        return principal

    def _token_from(self, authorization: Any) -> str:
        if not isinstance(authorization, str) or not authorization:
            raise _Refused("invalid_token", "no Authorization header")
        if len(authorization) > self.options.max_token_bytes + len("DPoP "):
            raise _Refused("invalid_token", "Authorization header too large")
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "dpop":
            raise _Refused("invalid_token", f"scheme {scheme[:16]!r} is not DPoP")
        token = token.strip()
        if not _JWS_RE.fullmatch(token):
            raise _Refused("invalid_token", "token is not a compact JWS")
        return token

    def _check_proof(
        self, proof: str, token: str, request: RequestInfo, now: float
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        if not _JWS_RE.fullmatch(proof):
            raise _Refused("invalid_dpop_proof", "proof is not one compact JWS")
        try:
            header = _segment(proof.split(".", 1)[0])
        except ValueError:
            raise _Refused("invalid_dpop_proof", "proof header is not base64url JSON") from None
        typ = header.get("typ")
        if not isinstance(typ, str) or typ.lower() != PROOF_TYPE:
            raise _Refused("invalid_dpop_proof", "proof typ is not dpop+jwt")
        alg = header.get("alg")
        if alg not in self.options.dpop_algorithms:
            raise _Refused("invalid_dpop_proof", "proof alg not allowed")
        if "crit" in header or "b64" in header:
            raise _Refused("invalid_dpop_proof", "proof has critical extensions")
        jwk = header.get("jwk")
        try:
            key = public_key_for(jwk, str(alg))
        except JWKError as exc:
            raise _Refused("invalid_dpop_proof", f"proof jwk: {exc}") from None
        assert isinstance(jwk, dict)  # public_key_for checked it is a mapping
        claims = self._signed_payload(proof, key, str(alg), "invalid_dpop_proof")
        jti = _string(claims.get("jti"), "invalid_dpop_proof", "jti", max_length=MAX_JTI_LENGTH)
        claims["jti"] = jti
        if claims.get("htm") != request["method"].upper():
            raise _Refused("invalid_dpop_proof", "htm does not match the method")
        htu = claims.get("htu")
        try:
            if not isinstance(htu, str) or normalize_htu(htu) != normalize_htu(request["url"]):
                raise _Refused("invalid_dpop_proof", "htu does not match the URL")
        except ValueError:
            raise _Refused("invalid_dpop_proof", "htu is not an http(s) URL") from None
        iat = claims.get("iat")
        if not _number(iat):
            raise _Refused("invalid_dpop_proof", "iat missing")
        if iat > now + self.options.leeway:
            raise _Refused("invalid_dpop_proof", "iat in the future")
        if iat < now - self.options.proof_max_age - self.options.leeway:
            raise _Refused("invalid_dpop_proof", "iat too old")
        ath = b64url(hashlib.sha256(token.encode("ascii")).digest())
        if not isinstance(claims.get("ath"), str) or not hmac.compare_digest(claims["ath"], ath):
            raise _Refused("invalid_dpop_proof", "ath is not the token's hash")
        if self.options.require_nonce and not nonces.is_valid(
            claims.get("nonce"),
            now,
            lifetime=self.options.nonce_lifetime,
            secret=self.options.nonce_secret,
        ):
            raise _Refused("use_dpop_nonce", "nonce missing or stale")
        return jwk, claims

    def _signed_payload(self, jws: str, key: PublicKey, alg: str, code: str) -> dict[str, Any]:
        """Verify a compact JWS (its shape already checked) and return its JSON payload.

        pyjwt's algorithm objects check the signature; the JWS framing is done here because
        PyJWS re-validates every character in Python, a third of the verifier's time.
        """
        header, payload, signature = jws.split(".")
        try:
            valid = _ALGORITHMS[alg].verify(
                f"{header}.{payload}".encode("ascii"), key, _b64decode(signature)
            )
            claims = json.loads(_b64decode(payload)) if valid else None
        except (ValueError, TypeError):
            raise _Refused(code, "signature or payload malformed") from None
        if not valid:
            raise _Refused(code, "signature invalid")
        if not isinstance(claims, dict):
            raise _Refused(code, "payload is not an object")
        return claims

    def _check_token(self, token: str, url: str, now: float) -> dict[str, Any]:
        options = self.options
        try:
            header = _segment(token.split(".", 1)[0])
        except ValueError:
            raise _Refused("invalid_token", "token header is not base64url JSON") from None
        alg = header.get("alg")
        if alg not in options.algorithms:
            raise _Refused("invalid_token", "token alg not allowed")
        typ = header.get("typ")
        typ_lower = typ.lower() if isinstance(typ, str) else None
        if typ_lower == PROOF_TYPE:
            raise _Refused("invalid_token", "a DPoP proof is not a token")
        if options.token_types is not None and typ_lower not in {
            t.lower() for t in options.token_types
        }:
            raise _Refused("invalid_token", "token typ not accepted")
        if "crit" in header or "b64" in header:
            raise _Refused("invalid_token", "token has critical extensions")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise _Refused("invalid_token", "kid is not a string")
        key = self.keys.key(kid, str(alg))
        if key is None:
            raise _Refused("invalid_token", "no issuer key for the token's kid")
        claims = self._signed_payload(token, key, str(alg), "invalid_token")
        if claims.get("iss") != self.issuer:
            raise _Refused("invalid_token", "wrong issuer")
        audience = claims.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience
        if not isinstance(audiences, list) or not any(
            value in audiences for value in self._resources(url)
        ):
            raise _Refused("invalid_token", "wrong audience")
        exp = claims.get("exp")
        if not _number(exp) or exp <= now - options.leeway:
            raise _Refused("invalid_token", "expired or no exp")
        for name in ("nbf", "iat"):
            value = claims.get(name)
            if value is not None and (not _number(value) or value > now + options.leeway):
                raise _Refused("invalid_token", f"{name} in the future")
        return claims

    def _resources(self, url: str) -> tuple[str, ...]:
        """The audiences this endpoint answers to: configured, else the public endpoint URL."""
        if self.options.audience is not None:
            return self.options.audience
        parts = urlsplit(url)
        return (f"{parts.scheme}://{parts.netloc}/{self.path}",)

    def _principal(self, claims: Mapping[str, Any], url: str) -> Principal:
        names = self.options.claims
        client_id = _string(_claim(claims, names["client_id"]), "invalid_token", "client id")
        user_id = _string(_claim(claims, names["user_id"]), "invalid_token", "user id")
        account = _claim(claims, names["account_id"])
        if account is not None:
            account = _string(account, "invalid_token", "account id", max_length=256)
        signed_in_claim = _claim(claims, names["signed_in"])
        if signed_in_claim is None:
            signed_in = account is not None
        elif isinstance(signed_in_claim, bool):
            signed_in = signed_in_claim
        else:
            raise _Refused("invalid_token", "signed-in flag is not a boolean")
        if signed_in and account is None:
            raise _Refused("invalid_token", "signed in without an account")
        session = _claim(claims, names["session_id"])
        if session is not None:
            session = _string(session, "invalid_token", "session id")
        scope = _claim(claims, names["scope"])
        if scope is None:
            scopes: frozenset[str] = frozenset()
        elif isinstance(scope, str):
            scopes = frozenset(scope.split())
        elif isinstance(scope, list) and all(isinstance(s, str) for s in scope):
            scopes = frozenset(scope)
        else:
            raise _Refused("invalid_token", "scope is neither a string nor a list")
        audience = claims.get("aud")
        resources = self._resources(url)
        resource = next(
            (
                r
                for r in resources
                if r == audience or (isinstance(audience, list) and r in audience)
            ),
            resources[0],
        )
        return Principal(
            client_id=client_id,
            user_id=user_id,
            account_id=account if signed_in else None,
            session_id=session,
            signed_in=signed_in,
            scopes=scopes,
            resource=resource,
            token_type="DPoP",
        )

    def _check_scope(self, principal: Principal) -> None:
        required = self.options.required_scope
        if not required:
            return
        if not principal.signed_in:
            raise _Refused("sign_in_required", "signed out", scope=required)
        if required not in principal.scopes:
            raise _Refused("insufficient_scope", "scope missing", scope=required)


# -- the configured verifier ---------------------------------------------------------------

_lock = threading.Lock()
_current: DPoPVerifier | None = None


def key_source(options: TokenOptions) -> KeySource:
    """Inline JWKS, else the JWKS URL, else the development authority's key."""
    if options.jwks is not None:
        return StaticKeys(options.jwks)
    if options.jwks_url:
        return RemoteKeys(
            options.jwks_url,
            max_age=options.jwks_cache_seconds,
            min_refresh=options.jwks_min_refresh_seconds,
            timeout=options.jwks_timeout_seconds,
        )
    from poppy_django.auth import dev_authority

    if dev_authority.enabled():
        return StaticKeys(dev_authority.public_jwks())
    raise ImproperlyConfigured(
        'The DPoP verifier needs issuer keys: POPPY["TOKENS"]["JWKS_URL"] or ["JWKS"].'
    )


def expected_issuer() -> str:
    """``POPPY["ISSUER"]``, else the development authority's issuer."""
    found = addresses.issuer()
    if found is None:
        raise ImproperlyConfigured('The DPoP verifier needs POPPY["ISSUER"].')
    return found


def build_verifier(clock: Callable[[], float] = time.time) -> DPoPVerifier:
    """A verifier from the current settings."""
    options = poppy_settings.token_options
    return DPoPVerifier(
        options,
        issuer=expected_issuer(),
        keys=key_source(options),
        path=str(poppy_settings.PATH),
        clock=clock,
    )


def get_verifier() -> DPoPVerifier:
    """The verifier for the current settings, built once (its JWKS cache lives in it)."""
    global _current
    verifier = _current
    if verifier is None:
        with _lock:
            if _current is None:
                _current = build_verifier()
            verifier = _current
    return verifier


def verify(request: RequestInfo) -> Principal:
    """The default verifier: ``POPPY["AUTHENTICATE"] = "poppy_django.auth.dpop.verify"``."""
    return get_verifier()(request)


def reset() -> None:
    """Forget the built verifier (settings changed; tests)."""
    global _current
    with _lock:
        _current = None


@receiver(setting_changed)
def _reset_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting in ("POPPY", "SECRET_KEY", "CACHES"):
        reset()
