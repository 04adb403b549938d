"""The default verifier: DPoP-bound JWT Session Tokens (RFC 9449, RFC 7638, RFC 6750).

``POPPY = {"AUTHENTICATE": "poppy_django.verifier.dpop.verify", "ISSUER": ..., "TOKENS": {...}}``
(sub-keys in :mod:`poppy_django.token_options`). A request is accepted only when:

- ``Authorization: DPoP <token>`` (a Bearer token is refused: a DPoP-bound token sent as
  Bearer could be a stolen one) and one ``DPoP`` proof, both within their size limits;
- the proof: ``typ`` ``dpop+jwt``, an allowed asymmetric ``alg``, a public ``jwk`` that fits
  it, a valid signature, ``htm`` = the method, ``htu`` = the public URL (query and fragment
  ignored, scheme/host/port normalized), ``iat`` in the window, ``ath`` = the token's hash,
  a current server nonce when ``REQUIRE_NONCE``, and a ``jti`` never seen before;
- the token: an allowed ``alg``, signed by an issuer key (by ``kid``), ``iss`` = the issuer,
  ``aud`` naming the endpoint, ``exp``/``nbf``/``iat`` within leeway, ``cnf.jkt`` = the
  proof key's thumbprint, a client id and User, and (``POPPY["SESSION_STATUS"]``) a session
  that has not ended;
- every number in either is finite (Python's JSON reads ``NaN``, which no comparison stops).

pyjwt does the JWS work (framing, base64url, signature) and the ``iss``/``aud``/required-claim
checks. What is DPoP's own stays here: the proof's claims, the key/alg fit and thumbprint
(:mod:`poppy_django.verifier.jwk`). Time claims are compared here, against the verifier's clock,
because pyjwt reads the wall clock and accepts numeric strings ("123") as times. Two bounded
caches keep the work per request to what changes per request: a token's signature is checked
once (:class:`VerifiedTokens`), and a client's proof header once (:class:`ProofKeys`).

An ``invalid_token`` refusal says which claim failed and why (never echoing a credential):
that is what a developer needs to fix a token minted for another audience. Proof refusals
keep one fixed description; which check failed is logged at DEBUG level (never the token or
the proof).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeGuard
from urllib.parse import urlsplit

import jwt
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from poppy_django.conf import poppy_settings
from poppy_django.token_options import TokenOptions
from poppy_django.verifier import local_issuer, nonces, replay, sessions
from poppy_django.verifier.jwk import JWKError, PublicKey, b64url, public_key_for, thumbprint
from poppy_django.verifier.jwks import KeySource, RemoteKeys, StaticKeys
from poppy_django.verifier.principal import AuthRefusal, Principal, RequestInfo

logger = logging.getLogger("poppy_django.auth")

#: The description of each refusal (``invalid_token`` adds which claim failed and why).
DESCRIPTIONS = {
    "invalid_token": "The access token is missing, malformed, expired or not for this resource.",
    "invalid_dpop_proof": "The DPoP proof is missing or not valid for this request.",
    "use_dpop_nonce": "Sign the DPoP proof with the nonce in the DPoP-Nonce header.",
    "sign_in_required": "The User must sign in for this request.",
    "insufficient_scope": "The token lacks a scope this request requires.",
}
PROOF_TYPE = "dpop+jwt"
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: Claim values longer than these are refused rather than stored.
MAX_ID_LENGTH = 512
MAX_JTI_LENGTH = 256
#: Claim values quoted in a refusal are cut to this length.
MAX_QUOTED = 200
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
_TOKEN_OPTIONS: Any = {
    "verify_exp": False,
    "verify_nbf": False,
    "verify_iat": False,
    "require": ["iss", "aud", "exp"],
}


class _Refused(Exception):
    """Internal: a failed check. ``reason`` is logged; for invalid_token it is also told, and
    so it is when ``told`` (a reason naming only public facts that tell the fix)."""

    def __init__(
        self, code: str, reason: str, *, scope: str | None = None, told: bool = False
    ) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.scope = scope
        self.told = told


def _number(value: Any) -> TypeGuard[int | float]:
    """A JSON number that is finite (not a bool, not NaN or Infinity). An integer is always
    finite (``math.isfinite`` would overflow on one past a float's range)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _all_finite(value: Any) -> bool:
    """No NaN or Infinity anywhere in a decoded JSON value (iterative: depth is the caller's)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return True


def _same(value: Any, expected: str) -> bool:
    """Constant-time equality of an untrusted claim and an ASCII value (no TypeError on
    non-ASCII text, which ``hmac.compare_digest`` raises for ``str``)."""
    return isinstance(value, str) and value.isascii() and hmac.compare_digest(value, expected)


def _quote(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_QUOTED else text[: MAX_QUOTED - 3] + "..."


def _when(timestamp: float) -> str:
    """A time for a refusal's description; one past any calendar as seconds since the epoch."""
    try:
        return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError, OSError):
        return f"{_quote(timestamp)} s after the epoch"


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
        raise _Refused(code, f"{what}: missing, empty, too long or not a string")
    return value


def _compact(jws: str, code: str, what: str) -> None:
    """Refuse what is not one compact JWS before pyjwt sees it (two proofs in one header)."""
    if jws.count(".") != 2 or not jws.isascii():
        raise _Refused(code, f"{what}: not one compact JWS")


def _header(jws: str, code: str, what: str) -> dict[str, Any]:
    """The unverified JOSE header of one compact JWS (pyjwt parses it)."""
    _compact(jws, code, what)
    try:
        return jwt.get_unverified_header(jws)
    except (jwt.InvalidTokenError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise _Refused(code, f"{what}: malformed header ({reason})") from None


class VerifiedTokens:
    """Verified token claims by token hash, bounded LRU: a token's signature is checked once.

    Only tokens that passed the signature, ``iss`` and ``aud`` checks enter, so callers
    without credentials cannot fill it. An entry is kept until the token expires, and never
    longer than ``max_age`` (the JWKS cache time: a retired key stops counting by then).
    Time claims, the proof, the session and the replay cache are still checked per request.
    """

    def __init__(self, size: int, max_age: float) -> None:
        self.size = size
        self.max_age = max_age
        self._entries: OrderedDict[bytes, tuple[float, dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(token: str, audiences: tuple[str, ...]) -> bytes:
        return hashlib.sha256("\x00".join((token, *audiences)).encode()).digest()

    def get(self, key: bytes, now: float) -> dict[str, Any] | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] <= now:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: bytes, claims: dict[str, Any], now: float, leeway: float) -> None:
        if self.size <= 0:
            return
        until = min(float(claims["exp"]) + leeway, now + self.max_age)
        with self._lock:
            self._entries[key] = (until, claims)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


@dataclass(frozen=True)
class ProofKey:
    """What a proof's checked header gives: its ``alg``, public key and key thumbprint."""

    alg: str
    key: PublicKey
    jkt: str


class ProofKeys:
    """Checked proof headers by their encoded segment, bounded LRU: a client's header is
    parsed, its key fitted to its ``alg`` and thumbprinted once, not on every request.

    A client signs every proof with one header (``typ``, ``alg``, ``jwk``), so the segment
    repeats byte for byte, and what the header checks make of it depends on nothing else
    (the verifier's options are fixed for its life): a hit is exactly what the checks would
    give. The signature and every claim are still checked per request. Only headers of
    proofs that verified and matched a verified token's ``cnf.jkt`` enter, so callers
    without credentials cannot fill it.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[str, ProofKey] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, segment: str) -> ProofKey | None:
        with self._lock:
            entry = self._entries.get(segment)
            if entry is not None:
                self._entries.move_to_end(segment)
            return entry

    def put(self, segment: str, proof_key: ProofKey) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._entries[segment] = proof_key
            self._entries.move_to_end(segment)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


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
        self.verified = VerifiedTokens(
            options.verified_token_cache_size, max_age=options.jwks_cache_seconds
        )
        #: One header per client key, and each verified token is bound to one: same bound.
        self.proof_keys = ProofKeys(options.verified_token_cache_size)

    # -- the contract ----------------------------------------------------------------------

    def __call__(self, request: RequestInfo) -> Principal:
        try:
            return self._verify(request, self.clock())
        except _Refused as refused:
            logger.debug("Refused a Poppy request (%s): %s", refused.code, refused.reason)
            told = refused.code == "invalid_token" or refused.told
            description = refused.reason if told else None
            raise self.refusal(refused.code, scope=refused.scope, description=description) from None

    def refusal(
        self, code: str, *, scope: str | None = None, description: str | None = None
    ) -> AuthRefusal:
        """The :class:`AuthRefusal` for ``code``: WWW-Authenticate with algs, nonce if asked."""
        challenge = f'DPoP error="{code}"'
        if scope:
            challenge += f', scope="{scope}"'
        challenge += f', algs="{self.algs_param}"'
        headers: dict[str, str] = {}
        if code == "use_dpop_nonce" or self.options.require_nonce:
            headers["DPoP-Nonce"] = self.current_nonce()
        return AuthRefusal(
            code, description or DESCRIPTIONS[code], www_authenticate=challenge, headers=headers
        )

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
        _compact(proof, "invalid_dpop_proof", "proof")
        segment = proof.partition(".")[0]
        remembered = self.proof_keys.get(segment)
        proof_key = remembered or self._proof_key(proof)
        proof_claims = self._check_proof(proof, proof_key, token, request, now)
        claims = self._check_token(token, request["url"], now)
        jkt = proof_key.jkt
        if not _same(_claim(claims, self.options.claims["jkt"]), jkt):
            raise _Refused("invalid_dpop_proof", "proof key is not the token's cnf.jkt")
        if remembered is None:
            self.proof_keys.put(segment, proof_key)
        principal = sessions.current(self._principal(claims, request["url"]))
        if principal is None:
            raise _Refused(
                "invalid_token",
                "session revoked: the session behind this token has ended (signed out or "
                "revoked); get a new token",
            )
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

    def verify_bearer(self, request: RequestInfo) -> Principal:
        """``Authorization: Bearer <token>`` for the one resource that may take it (an MCP
        server, Poppy §4.3): every token check but the proof, and the token must be unbound.

        A token with a ``cnf.jkt`` is refused: a DPoP-bound token sent as Bearer is one
        whose key the sender may not hold (RFC 9449 §7.1). Only this verifier's audience is
        accepted, so a Bearer token is good at exactly the URL it was issued for.
        """
        try:
            token = self._token_from(request["headers"].get("authorization"), scheme="bearer")
            claims = self._check_token(token, request["url"], self.clock())
            if _claim(claims, self.options.claims["jkt"]) is not None:
                raise _Refused(
                    "invalid_token", "Authorization: a DPoP-bound token is not a Bearer token"
                )
            principal = sessions.current(
                replace(self._principal(claims, request["url"]), token_type="Bearer")
            )
            if principal is None:
                raise _Refused(
                    "invalid_token",
                    "session revoked: the session behind this token has ended (signed out or "
                    "revoked); get a new token",
                )
            self._check_scope(principal)
            return principal
        except _Refused as refused:
            logger.debug("Refused a Bearer request (%s): %s", refused.code, refused.reason)
            told = refused.code == "invalid_token" or refused.told
            description = refused.reason if told else None
            raise self.refusal(refused.code, scope=refused.scope, description=description) from None

    def _token_from(self, authorization: Any, scheme: str = "dpop") -> str:
        if not isinstance(authorization, str) or not authorization:
            raise _Refused("invalid_token", "Authorization: missing")
        if len(authorization) > self.options.max_token_bytes + len(scheme) + 1:
            raise _Refused("invalid_token", "Authorization: larger than MAX_TOKEN_BYTES")
        given, _, token = authorization.strip().partition(" ")
        if given.lower() != scheme:
            raise _Refused(
                "invalid_token",
                "Authorization: the scheme is not DPoP (a DPoP-bound token)"
                if scheme == "dpop"
                else "Authorization: the scheme is not Bearer",
            )
        token = token.strip()
        if not token.isascii():
            raise _Refused("invalid_token", "Authorization: the token is not a compact JWS")
        return token

    def _check_proof(
        self, proof: str, proof_key: ProofKey, token: str, request: RequestInfo, now: float
    ) -> dict[str, Any]:
        """The proof's signature by its header's key (pyjwt: its one parse of the proof when
        the header was remembered) and its claims."""
        try:
            claims = jwt.decode(
                proof, proof_key.key, algorithms=[proof_key.alg], options=_PROOF_OPTIONS
            )
        except (jwt.InvalidTokenError, RecursionError) as exc:
            raise _Refused("invalid_dpop_proof", f"proof: {type(exc).__name__}") from None
        if not _all_finite(claims):
            raise _Refused("invalid_dpop_proof", "a proof claim is NaN or Infinity")
        jti = _string(claims.get("jti"), "invalid_dpop_proof", "jti", max_length=MAX_JTI_LENGTH)
        claims["jti"] = jti
        if claims.get("htm") != request["method"].upper():
            raise _Refused("invalid_dpop_proof", "htm does not match the method")
        htu = claims.get("htu")
        try:
            expected = normalize_htu(request["url"])
            if not isinstance(htu, str) or normalize_htu(htu) != expected:
                # The URL this server is at is public, and a wrong POPPY["BASE_URL"] (or a
                # proxy's missing headers) is the usual cause: say which URL was expected.
                raise _Refused(
                    "invalid_dpop_proof",
                    f"htu does not match the URL: this server expected {expected} (its public "
                    'URL: POPPY["BASE_URL"], else the request\'s host and scheme)',
                    told=True,
                )
        except ValueError:
            raise _Refused("invalid_dpop_proof", "htu is not an http(s) URL") from None
        iat = claims.get("iat")
        if not _number(iat):
            raise _Refused("invalid_dpop_proof", "iat missing or not a finite number")
        if iat > now + self.options.leeway:
            raise _Refused("invalid_dpop_proof", "iat in the future")
        if iat < now - self.options.proof_max_age - self.options.leeway:
            raise _Refused("invalid_dpop_proof", "iat too old")
        ath = b64url(hashlib.sha256(token.encode()).digest())
        if not _same(claims.get("ath"), ath):
            raise _Refused("invalid_dpop_proof", "ath is not the token's hash")
        if self.options.require_nonce and not nonces.is_valid(
            claims.get("nonce"),
            now,
            lifetime=self.options.nonce_lifetime,
            secret=self.options.nonce_secret,
        ):
            raise _Refused("use_dpop_nonce", "nonce missing or stale")
        return claims

    def _proof_key(self, proof: str) -> ProofKey:
        """The header checks: ``typ``, an allowed ``alg``, no extensions, a public ``jwk``
        that fits the ``alg``; then its thumbprint."""
        header = _header(proof, "invalid_dpop_proof", "proof")
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
            assert isinstance(jwk, dict)  # public_key_for checked it is a mapping
            return ProofKey(str(alg), key, thumbprint(jwk))
        except JWKError as exc:
            raise _Refused("invalid_dpop_proof", f"proof jwk: {exc}") from None

    def _check_token(self, token: str, url: str, now: float) -> dict[str, Any]:
        audiences = self._resources(url)
        cache_key = self.verified.key(token, audiences)
        claims = self.verified.get(cache_key, now)
        if claims is None:
            claims = self._verify_signed_token(token, audiences)
            self._check_times(claims, now)
            self.verified.put(cache_key, claims, now, self.options.leeway)
        else:
            self._check_times(claims, now)
        return claims

    def _verify_signed_token(self, token: str, audiences: tuple[str, ...]) -> dict[str, Any]:
        """The signature, ``iss``, ``aud`` and required claims (pyjwt), and finite numbers."""
        options = self.options
        header = _header(token, "invalid_token", "token")
        alg = header.get("alg")
        if alg not in options.algorithms:
            raise _Refused(
                "invalid_token", f"alg: not one of the accepted {', '.join(options.algorithms)}"
            )
        typ = header.get("typ")
        typ_lower = typ.lower() if isinstance(typ, str) else None
        if typ_lower == PROOF_TYPE:
            raise _Refused("invalid_token", "typ: a DPoP proof is not an access token")
        if options.token_types is not None and typ_lower not in {
            t.lower() for t in options.token_types
        }:
            raise _Refused(
                "invalid_token", f"typ: not one of the accepted {', '.join(options.token_types)}"
            )
        if "crit" in header or "b64" in header:
            raise _Refused("invalid_token", "crit: critical header extensions are not supported")
        kid = header.get("kid")
        key = self.keys.key(kid, str(alg))
        if key is None:
            raise _Refused("invalid_token", f"kid: the issuer has no {alg} key with this kid")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[str(alg)],
                issuer=self.issuer,
                audience=audiences,
                options=_TOKEN_OPTIONS,
            )
        except jwt.InvalidSignatureError:
            raise _Refused("invalid_token", "signature: not made by the issuer's key") from None
        except jwt.MissingRequiredClaimError as exc:
            raise _Refused("invalid_token", f"{exc.claim}: missing") from None
        except jwt.InvalidIssuerError:
            iss = self._unverified(token).get("iss")
            raise _Refused(
                "invalid_token",
                f"iss mismatch: token is from {_quote(iss)}, this endpoint trusts {self.issuer!r}",
            ) from None
        except jwt.InvalidAudienceError:
            aud = self._unverified(token).get("aud")
            raise _Refused(
                "invalid_token",
                f"aud mismatch: token is for {_quote(aud)}, this endpoint is "
                f"{' or '.join(map(repr, audiences))}",
            ) from None
        except jwt.InvalidTokenError as exc:
            raise _Refused("invalid_token", f"token: {exc}") from None
        except RecursionError:  # pyjwt before 2.15 let deep JSON through
            raise _Refused("invalid_token", "token: nested too deeply") from None
        if not _all_finite(claims):
            raise _Refused("invalid_token", "a claim is NaN or Infinity: numbers must be finite")
        return claims

    @staticmethod
    def _unverified(token: str) -> dict[str, Any]:
        """Claims of a token whose signature pyjwt has just verified (to quote iss/aud)."""
        claims = jwt.decode(token, options={"verify_signature": False})
        return claims if isinstance(claims, dict) else {}

    def _check_times(self, claims: Mapping[str, Any], now: float) -> None:
        leeway = self.options.leeway
        exp = claims.get("exp")
        if not _number(exp):
            raise _Refused("invalid_token", "exp: not a finite number")
        if exp <= now - leeway:
            raise _Refused(
                "invalid_token",
                f"exp: expired at {_when(exp)} (now {_when(now)}, leeway {leeway:g} s)",
            )
        for name in ("nbf", "iat"):
            value = claims.get(name)
            if value is None:
                continue
            if not _number(value):
                raise _Refused("invalid_token", f"{name}: not a finite number")
            if value > now + leeway:
                raise _Refused(
                    "invalid_token",
                    f"{name}: {_when(value)} is in the future (now {_when(now)}, "
                    f"leeway {leeway:g} s)",
                )

    def _resources(self, url: str) -> tuple[str, ...]:
        """The audiences this endpoint answers to: configured, else the public endpoint URL."""
        if self.options.audience is not None:
            return self.options.audience
        parts = urlsplit(url)
        return (f"{parts.scheme}://{parts.netloc}/{self.path}",)

    def _principal(self, claims: Mapping[str, Any], url: str) -> Principal:
        names = self.options.claims
        client_id = _string(_claim(claims, names["client_id"]), "invalid_token", names["client_id"])
        user_id = _string(_claim(claims, names["user_id"]), "invalid_token", names["user_id"])
        account = _claim(claims, names["account_id"])
        if account is not None:
            account = _string(account, "invalid_token", names["account_id"], max_length=256)
        signed_in_claim = _claim(claims, names["signed_in"])
        if signed_in_claim is None:
            signed_in = account is not None
        elif isinstance(signed_in_claim, bool):
            signed_in = signed_in_claim
        else:
            raise _Refused("invalid_token", f"{names['signed_in']}: not a boolean")
        if signed_in and account is None:
            raise _Refused(
                "invalid_token", f"{names['signed_in']}: signed in without {names['account_id']}"
            )
        session = _claim(claims, names["session_id"])
        if session is not None:
            session = _string(session, "invalid_token", names["session_id"])
        scope = _claim(claims, names["scope"])
        if scope is None:
            scopes: frozenset[str] = frozenset()
        elif isinstance(scope, str):
            scopes = frozenset(scope.split())
        elif isinstance(scope, list) and all(isinstance(s, str) for s in scope):
            scopes = frozenset(scope)
        else:
            raise _Refused("invalid_token", f"{names['scope']}: neither a string nor a list")
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
    """Inline JWKS, else the JWKS URL, else the keys of the issuer app installed in this
    project (:mod:`poppy_django.verifier.local_issuer`): its tokens are checked locally."""
    if options.jwks is not None:
        return StaticKeys(options.jwks)
    if options.jwks_url:
        return RemoteKeys(
            options.jwks_url,
            max_age=options.jwks_cache_seconds,
            min_refresh=options.jwks_min_refresh_seconds,
            timeout=options.jwks_timeout_seconds,
        )
    local = local_issuer.registered()
    if local is not None:
        refusal = local.refusal()
        if refusal is not None:
            raise ImproperlyConfigured(f"The DPoP verifier has no issuer keys: {refusal}")
        return StaticKeys(dict(local.public_jwks()))
    raise ImproperlyConfigured(
        'The DPoP verifier needs issuer keys: POPPY["TOKENS"]["JWKS_URL"] or ["JWKS"].'
    )


def _issuer() -> str:
    """:func:`~poppy_django.verifier.local_issuer.token_issuer`, required: the verifier
    cannot run without."""
    found = local_issuer.token_issuer()
    if found:
        return found
    local = local_issuer.registered()
    refusal = local.refusal() if local is not None else None
    if refusal is not None:
        raise ImproperlyConfigured(f"The DPoP verifier has no issuer: {refusal}")
    raise ImproperlyConfigured('The DPoP verifier needs POPPY["ISSUER"].')


def build_verifier(clock: Callable[[], float] = time.time) -> DPoPVerifier:
    """A verifier from the current settings."""
    options = poppy_settings.token_options
    return DPoPVerifier(
        options,
        issuer=_issuer(),
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
    """The default verifier: ``POPPY["AUTHENTICATE"] = "poppy_django.verifier.dpop.verify"``."""
    return get_verifier()(request)


def reset() -> None:
    """Forget the built verifier (settings changed; tests)."""
    global _current
    with _lock:
        _current = None


@receiver(setting_changed)
def _reset_on_change(*, setting: str, **kwargs: Any) -> None:
    # DEBUG and POPPY_AUTHORITY: which key and issuer the local issuer has.
    if setting in ("POPPY", "POPPY_AUTHORITY", "SECRET_KEY", "CACHES", "DEBUG"):
        reset()
