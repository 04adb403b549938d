"""The default verifier's options: ``POPPY["TOKENS"]``, every sub-key with its default.

Written once here so the verifier, the system checks and the docs agree. Sub-keys
(upper case, unknown ones refused by check ``poppy_django.E105``):

``JWKS_URL`` (None)
    The issuer's JWKS URL. Fetched on first use, cached ``JWKS_CACHE_SECONDS``, refetched on an
    unknown ``kid`` at most once per ``JWKS_MIN_REFRESH_SECONDS`` per process (no fetch storm).
``JWKS`` (None)
    An inline JWKS (``{"keys": [...]}``) instead of a URL. With neither and
    an issuer app installed in this project (the authority), its own key is used.
``ALGORITHMS`` (``["ES256", "RS256", "EdDSA"]``)
    Token signature algorithms. ``none`` and HMAC are never accepted (check E103).
``DPOP_ALGORITHMS`` (``["ES256", "RS256", "EdDSA"]``)
    DPoP proof algorithms, advertised in ``WWW-Authenticate: DPoP algs="..."``.
``TOKEN_TYPES`` (None)
    Accepted JWT ``typ`` headers of a token (e.g. ``["at+jwt"]``); None accepts any but
    ``dpop+jwt`` (a proof is never a token).
``AUDIENCE`` (None)
    The resource a token's ``aud`` must name; None: the public endpoint URL
    (public origin + "/" + ``POPPY["PATH"]``). A string or a list of accepted values.
``CLAIMS`` (see :data:`DEFAULT_CLAIMS`)
    Claim names, merged over the defaults; a dotted name reads a nested claim (``cnf.jkt``).
``LEEWAY_SECONDS`` (30)
    Clock skew allowed on ``exp``/``nbf``/``iat`` of tokens and on a proof's future ``iat``.
``PROOF_MAX_AGE_SECONDS`` (60)
    How old a proof's ``iat`` may be; replay-cache entries live this long plus twice the leeway.
``REQUIRE_NONCE`` (False)
    Require server nonces: a proof without a current one gets ``use_dpop_nonce`` and a
    ``DPoP-Nonce`` header.
``NONCE_LIFETIME_SECONDS`` (300)
    A nonce is valid in its time window and the next (so 1-2 windows).
``NONCE_SECRET`` (None)
    The nonce HMAC secret; None derives one from ``SECRET_KEY`` (shared by all processes).
``REPLAY_CACHE`` ("default")
    The Django cache alias of the ``jti`` replay cache; use Redis (or the database cache)
    when several processes serve the endpoint.
``REQUIRED_SCOPE`` (None)
    A scope every request needs: signed out → 403 ``sign_in_required``, signed in without it →
    403 ``insufficient_scope``.
``MAX_TOKEN_BYTES`` / ``MAX_PROOF_BYTES`` (8192 / 8192)
    Larger ``Authorization`` / ``DPoP`` headers are refused without being parsed.
``JWKS_CACHE_SECONDS`` (300), ``JWKS_MIN_REFRESH_SECONDS`` (30), ``JWKS_TIMEOUT_SECONDS`` (5)
    Remote JWKS caching and fetching.
``VERIFIED_TOKEN_CACHE_SIZE`` (1024)
    Verified tokens remembered per process (by hash), so a token's signature is checked once:
    until it expires, and at most ``JWKS_CACHE_SECONDS``; as many checked proof headers (a
    client's key). 0 checks every request's token and proof header.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from poppy_django.unknown_keys import unknown_keys

#: Token algorithms the verifier can check. HMAC and ``none`` are deliberately absent.
ASYMMETRIC_ALGORITHMS = frozenset(
    {"ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA"}
)

DEFAULT_CLAIMS: dict[str, str] = {
    "client_id": "client_id",
    "user_id": "sub",
    "account_id": "acct",
    "session_id": "sid",
    "scope": "scope",
    "signed_in": "signed_in",
    "jkt": "cnf.jkt",
}

TOKEN_DEFAULTS: dict[str, Any] = {
    "JWKS_URL": None,
    "JWKS": None,
    "ALGORITHMS": ["ES256", "RS256", "EdDSA"],
    "DPOP_ALGORITHMS": ["ES256", "RS256", "EdDSA"],
    "TOKEN_TYPES": None,
    "AUDIENCE": None,
    "CLAIMS": {},
    "LEEWAY_SECONDS": 30,
    "PROOF_MAX_AGE_SECONDS": 60,
    "REQUIRE_NONCE": False,
    "NONCE_LIFETIME_SECONDS": 300,
    "NONCE_SECRET": None,
    "REPLAY_CACHE": "default",
    "REQUIRED_SCOPE": None,
    "MAX_TOKEN_BYTES": 8192,
    "MAX_PROOF_BYTES": 8192,
    "JWKS_CACHE_SECONDS": 300,
    "JWKS_MIN_REFRESH_SECONDS": 30,
    "JWKS_TIMEOUT_SECONDS": 5,
    "VERIFIED_TOKEN_CACHE_SIZE": 1024,
}


@dataclass(frozen=True)
class TokenOptions:
    """``POPPY["TOKENS"]`` merged over :data:`TOKEN_DEFAULTS` (the only defaults), types
    checked once: built by :func:`parse_options`, read as ``poppy_settings.token_options``."""

    jwks_url: str | None
    jwks: Mapping[str, Any] | None
    algorithms: tuple[str, ...]
    dpop_algorithms: tuple[str, ...]
    token_types: tuple[str, ...] | None
    audience: tuple[str, ...] | None
    claims: dict[str, str]
    leeway: float
    proof_max_age: float
    require_nonce: bool
    nonce_lifetime: float
    nonce_secret: str | None
    replay_cache: str
    required_scope: str | None
    max_token_bytes: int
    max_proof_bytes: int
    jwks_cache_seconds: float
    jwks_min_refresh_seconds: float
    jwks_timeout_seconds: float
    verified_token_cache_size: int

    @property
    def replay_ttl(self) -> float:
        """How long a ``jti`` must be remembered: as long as its proof could be accepted."""
        return self.proof_max_age + 2 * self.leeway


def _strings(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ImproperlyConfigured(f'POPPY["TOKENS"]["{name}"] must be a list of strings.')
    return tuple(value)


def refused_algorithms(value: Any) -> list[str]:
    """The entries of an ``ALGORITHMS``/``DPOP_ALGORITHMS`` value the verifier never accepts."""
    values = [value] if isinstance(value, str) else list(value or [])
    return [alg for alg in values if alg not in ASYMMETRIC_ALGORITHMS]


def _number(name: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ImproperlyConfigured(
            f'POPPY["TOKENS"]["{name}"] must be a finite non-negative number.'
        )
    return float(value)


def parse_options(raw: Mapping[str, Any] | None) -> TokenOptions:
    """Validate ``POPPY["TOKENS"]``; raises ``ImproperlyConfigured`` naming the bad key."""
    raw = dict(raw or {})
    unknown = unknown_keys('POPPY["TOKENS"]', raw, TOKEN_DEFAULTS)
    if unknown:
        raise ImproperlyConfigured(unknown)
    merged = {**TOKEN_DEFAULTS, **raw}
    claims = merged["CLAIMS"] or {}
    if not isinstance(claims, Mapping) or not all(isinstance(v, str) for v in claims.values()):
        raise ImproperlyConfigured('POPPY["TOKENS"]["CLAIMS"] must map names to claim names.')
    unknown_claims = unknown_keys('POPPY["TOKENS"]["CLAIMS"]', claims, DEFAULT_CLAIMS)
    if unknown_claims:
        raise ImproperlyConfigured(unknown_claims)
    jwks = merged["JWKS"]
    if jwks is not None and not (isinstance(jwks, Mapping) and isinstance(jwks.get("keys"), list)):
        raise ImproperlyConfigured('POPPY["TOKENS"]["JWKS"] must be a JWKS: {"keys": [...]}.')
    algorithms = _strings("ALGORITHMS", merged["ALGORITHMS"])
    dpop_algorithms = _strings("DPOP_ALGORITHMS", merged["DPOP_ALGORITHMS"])
    for name, algs in (("ALGORITHMS", algorithms), ("DPOP_ALGORITHMS", dpop_algorithms)):
        bad = refused_algorithms(algs)
        if bad or not algs:
            raise ImproperlyConfigured(
                f'POPPY["TOKENS"]["{name}"] allows {bad or "nothing"}: only asymmetric '
                f"algorithms ({', '.join(sorted(ASYMMETRIC_ALGORITHMS))}) are accepted."
            )
    token_types = merged["TOKEN_TYPES"]
    audience = merged["AUDIENCE"]
    secret = merged["NONCE_SECRET"]
    if secret is not None and not isinstance(secret, str):
        raise ImproperlyConfigured('POPPY["TOKENS"]["NONCE_SECRET"] must be a string.')
    required_scope = merged["REQUIRED_SCOPE"]
    if required_scope is not None and not isinstance(required_scope, str):
        raise ImproperlyConfigured('POPPY["TOKENS"]["REQUIRED_SCOPE"] must be a string.')
    return TokenOptions(
        jwks_url=merged["JWKS_URL"] or None,
        jwks=jwks,
        algorithms=algorithms,
        dpop_algorithms=dpop_algorithms,
        token_types=None if token_types is None else _strings("TOKEN_TYPES", token_types),
        audience=None if audience is None else _strings("AUDIENCE", audience),
        claims={**DEFAULT_CLAIMS, **claims},
        leeway=_number("LEEWAY_SECONDS", merged["LEEWAY_SECONDS"]),
        proof_max_age=_number("PROOF_MAX_AGE_SECONDS", merged["PROOF_MAX_AGE_SECONDS"]),
        require_nonce=bool(merged["REQUIRE_NONCE"]),
        nonce_lifetime=max(
            1.0, _number("NONCE_LIFETIME_SECONDS", merged["NONCE_LIFETIME_SECONDS"])
        ),
        nonce_secret=secret,
        replay_cache=str(merged["REPLAY_CACHE"]),
        required_scope=required_scope,
        max_token_bytes=int(_number("MAX_TOKEN_BYTES", merged["MAX_TOKEN_BYTES"])),
        max_proof_bytes=int(_number("MAX_PROOF_BYTES", merged["MAX_PROOF_BYTES"])),
        jwks_cache_seconds=_number("JWKS_CACHE_SECONDS", merged["JWKS_CACHE_SECONDS"]),
        jwks_min_refresh_seconds=_number(
            "JWKS_MIN_REFRESH_SECONDS", merged["JWKS_MIN_REFRESH_SECONDS"]
        ),
        jwks_timeout_seconds=_number("JWKS_TIMEOUT_SECONDS", merged["JWKS_TIMEOUT_SECONDS"]),
        verified_token_cache_size=int(
            _number("VERIFIED_TOKEN_CACHE_SIZE", merged["VERIFIED_TOKEN_CACHE_SIZE"])
        ),
    )
