"""The Session Token: a JWT signed by the issuer's key, for this resource, in time, naming its
personal agent and User (and account, session and scopes), bound to a proof key (``cnf.jkt``).

pyjwt does the JWS work (framing, base64url, signature) and the ``iss``/``aud``/required-claim
checks; the time claims are compared here, against the verifier's clock (pyjwt reads the wall
clock and accepts numeric strings as times). A token's signature is checked once
(:class:`~poppy_django.verifier.caches.VerifiedTokens`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import jwt

from poppy_django.token_options import TokenOptions
from poppy_django.verifier.caches import VerifiedTokens
from poppy_django.verifier.claims import (
    Refused,
    all_finite,
    claim,
    jws_header,
    number,
    quoted,
    string,
    when,
)
from poppy_django.verifier.jwks import KeySource
from poppy_django.verifier.principal import Principal
from poppy_django.verifier.proof import PROOF_TYPE

_TOKEN_OPTIONS: Any = {
    "verify_exp": False,
    "verify_nbf": False,
    "verify_iat": False,
    "require": ["iss", "aud", "exp"],
}


def token_from(options: TokenOptions, authorization: Any, scheme: str = "dpop") -> str:
    """The token of an ``Authorization`` header of this scheme, within its size limit."""
    if not isinstance(authorization, str) or not authorization:
        raise Refused("invalid_token", "Authorization: missing")
    if len(authorization) > options.max_token_bytes + len(scheme) + 1:
        raise Refused("invalid_token", "Authorization: larger than MAX_TOKEN_BYTES")
    given, _, token = authorization.strip().partition(" ")
    if given.lower() != scheme:
        raise Refused(
            "invalid_token",
            "Authorization: the scheme is not DPoP (a DPoP-bound token)"
            if scheme == "dpop"
            else "Authorization: the scheme is not Bearer",
        )
    token = token.strip()
    if not token.isascii():
        raise Refused("invalid_token", "Authorization: the token is not a compact JWS")
    return token


class TokenChecks:
    """The checks of a Session Token for one configuration (issuer, keys, endpoint path)."""

    def __init__(self, options: TokenOptions, *, issuer: str, keys: KeySource, path: str) -> None:
        self.options = options
        self.issuer = issuer
        self.keys = keys
        self.path = path.strip("/")
        self.verified = VerifiedTokens(
            options.verified_token_cache_size, max_age=options.jwks_cache_seconds
        )

    def check(self, token: str, url: str, now: float) -> dict[str, Any]:
        audiences = self.resources(url)
        cache_key = self.verified.key(token, audiences)
        claims = self.verified.get(cache_key, now)
        if claims is None:
            claims = self._verify_signed_token(token, audiences)
            self._check_times(claims, now)
            self.verified.put(cache_key, claims, now, self.options.leeway)
        else:
            self._check_times(claims, now)
        return claims

    def remembered(self, token: str, url: str, now: float) -> dict[str, Any] | None:
        """:meth:`check` for a token whose signature was checked before (None: not, or no
        longer, remembered: its check may need the issuer's keys)."""
        claims = self.verified.get(self.verified.key(token, self.resources(url)), now)
        if claims is not None:
            self._check_times(claims, now)
        return claims

    def _verify_signed_token(self, token: str, audiences: tuple[str, ...]) -> dict[str, Any]:
        """The signature, ``iss``, ``aud`` and required claims (pyjwt), and finite numbers."""
        options = self.options
        header = jws_header(token, "invalid_token", "token")
        alg = header.get("alg")
        if alg not in options.algorithms:
            raise Refused(
                "invalid_token", f"alg: not one of the accepted {', '.join(options.algorithms)}"
            )
        typ = header.get("typ")
        typ_lower = typ.lower() if isinstance(typ, str) else None
        if typ_lower == PROOF_TYPE:
            raise Refused("invalid_token", "typ: a DPoP proof is not an access token")
        if options.token_types is not None and typ_lower not in {
            t.lower() for t in options.token_types
        }:
            raise Refused(
                "invalid_token", f"typ: not one of the accepted {', '.join(options.token_types)}"
            )
        if "crit" in header or "b64" in header:
            raise Refused("invalid_token", "crit: critical header extensions are not supported")
        kid = header.get("kid")
        key = self.keys.key(kid, str(alg))
        if key is None:
            raise Refused("invalid_token", f"kid: the issuer has no {alg} key with this kid")
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
            raise Refused("invalid_token", "signature: not made by the issuer's key") from None
        except jwt.MissingRequiredClaimError as exc:
            raise Refused("invalid_token", f"{exc.claim}: missing") from None
        except jwt.InvalidIssuerError:
            iss = self._unverified(token).get("iss")
            raise Refused(
                "invalid_token",
                f"iss mismatch: token is from {quoted(iss)}, this endpoint trusts {self.issuer!r}",
            ) from None
        except jwt.InvalidAudienceError:
            aud = self._unverified(token).get("aud")
            raise Refused(
                "invalid_token",
                f"aud mismatch: token is for {quoted(aud)}, this endpoint is "
                f"{' or '.join(map(repr, audiences))}",
            ) from None
        except jwt.InvalidTokenError as exc:
            raise Refused("invalid_token", f"token: {exc}") from None
        except RecursionError:  # pyjwt before 2.15 let deep JSON through
            raise Refused("invalid_token", "token: nested too deeply") from None
        if not all_finite(claims):
            raise Refused("invalid_token", "a claim is NaN or Infinity: numbers must be finite")
        return claims

    @staticmethod
    def _unverified(token: str) -> dict[str, Any]:
        """Claims of a token whose signature pyjwt has just verified (to quote iss/aud)."""
        claims = jwt.decode(token, options={"verify_signature": False})
        return claims if isinstance(claims, dict) else {}

    def _check_times(self, claims: Mapping[str, Any], now: float) -> None:
        leeway = self.options.leeway
        exp = claims.get("exp")
        if not number(exp):
            raise Refused("invalid_token", "exp: not a finite number")
        if exp <= now - leeway:
            raise Refused(
                "invalid_token",
                f"exp: expired at {when(exp)} (now {when(now)}, leeway {leeway:g} s)",
            )
        for name in ("nbf", "iat"):
            value = claims.get(name)
            if value is None:
                continue
            if not number(value):
                raise Refused("invalid_token", f"{name}: not a finite number")
            if value > now + leeway:
                raise Refused(
                    "invalid_token",
                    f"{name}: {when(value)} is in the future (now {when(now)}, "
                    f"leeway {leeway:g} s)",
                )

    def resources(self, url: str) -> tuple[str, ...]:
        """The audiences this endpoint answers to: configured, else the public endpoint URL."""
        if self.options.audience is not None:
            return self.options.audience
        parts = urlsplit(url)
        return (f"{parts.scheme}://{parts.netloc}/{self.path}",)

    def principal(self, claims: Mapping[str, Any], url: str) -> Principal:
        names = self.options.claims
        client_id = string(claim(claims, names["client_id"]), "invalid_token", names["client_id"])
        user_id = string(claim(claims, names["user_id"]), "invalid_token", names["user_id"])
        account = claim(claims, names["account_id"])
        if account is not None:
            account = string(account, "invalid_token", names["account_id"], max_length=256)
        signed_in_claim = claim(claims, names["signed_in"])
        if signed_in_claim is None:
            signed_in = account is not None
        elif isinstance(signed_in_claim, bool):
            signed_in = signed_in_claim
        else:
            raise Refused("invalid_token", f"{names['signed_in']}: not a boolean")
        if signed_in and account is None:
            raise Refused(
                "invalid_token", f"{names['signed_in']}: signed in without {names['account_id']}"
            )
        session = claim(claims, names["session_id"])
        if session is not None:
            session = string(session, "invalid_token", names["session_id"])
        scope = claim(claims, names["scope"])
        if scope is None:
            scopes: frozenset[str] = frozenset()
        elif isinstance(scope, str):
            scopes = frozenset(scope.split())
        elif isinstance(scope, list) and all(isinstance(s, str) for s in scope):
            scopes = frozenset(scope)
        else:
            raise Refused("invalid_token", f"{names['scope']}: neither a string nor a list")
        audience = claims.get("aud")
        resources = self.resources(url)
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

    def check_scope(self, principal: Principal) -> None:
        required = self.options.required_scope
        if not required:
            return
        if not principal.signed_in:
            raise Refused("sign_in_required", "signed out", scope=required)
        if required not in principal.scopes:
            raise Refused("insufficient_scope", "scope missing", scope=required)
