"""Session Tokens: short-lived JWTs bound to a DPoP key, in the default verifier's format.

One signer (:func:`sign_claims`) for both ways a token is issued: the token endpoint's
(:func:`issue_session_token`, for a :class:`~poppy_django.authority.models.Session`) and the
development mode's (:func:`mint_development_token`, ``poppy_token``). The claims are the ones
:mod:`poppy_django.verifier.dpop` reads (names from ``POPPY["TOKENS"]["CLAIMS"]``), signed with
:func:`poppy_django.authority.keys.signing_key`, so the endpoint verifies them locally with the
same key, issuer and audience, no HTTP round trip.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jwt

from poppy_django.authority import development
from poppy_django.authority.conf import authority_settings
from poppy_django.authority.keys import ALGORITHM, jwks_of, signing_key
from poppy_django.authority.models import Session
from poppy_django.conf import poppy_settings
from poppy_django.verifier import local_issuer

TOKEN_TYPE = "at+jwt"


@dataclass(frozen=True)
class TokenClaims:
    """What a Session Token says, before claim names (``TOKENS["CLAIMS"]``) are applied."""

    issuer: str
    audience: str | list[str]
    client_id: str
    user_id: str
    session_id: str
    #: The DPoP key's thumbprint (``cnf.jkt``); None for a Bearer token (MCP only).
    jkt: str | None
    account_id: str | None = None
    scope: str = ""


def _set(payload: dict[str, Any], dotted: str, value: Any) -> None:
    # A dotted claim name is nested: "cnf.jkt" is {"cnf": {"jkt": ...}}.
    *parents, leaf = dotted.split(".")
    target = payload
    for parent in parents:
        target = target.setdefault(parent, {})
    target[leaf] = value


def sign_claims(claims: TokenClaims, *, lifetime: int, now: float | None = None) -> str:
    """The signed JWT: signed in when ``account_id`` is set (only then does ``scope`` count)."""
    names = poppy_settings.token_options.claims
    issued = int(time.time() if now is None else now)
    payload: dict[str, Any] = {
        "iss": claims.issuer,
        "aud": claims.audience,
        "iat": issued,
        "nbf": issued,
        "exp": issued + int(lifetime),
        "jti": secrets.token_urlsafe(16),
    }
    values: dict[str, Any] = {
        "client_id": claims.client_id,
        "user_id": claims.user_id,
        "session_id": claims.session_id,
        "signed_in": claims.account_id is not None,
    }
    if claims.jkt is not None:
        values["jkt"] = claims.jkt
    if claims.scope:  # written as given; the verifier counts scopes only when signed in
        values["scope"] = claims.scope
    if claims.account_id is not None:
        values["account_id"] = claims.account_id
    for name, value in values.items():
        _set(payload, names[name], value)
    key = signing_key()
    headers = {"kid": jwks_of(key)["keys"][0]["kid"], "typ": TOKEN_TYPE}
    return jwt.encode(payload, key, algorithm=ALGORITHM, headers=headers)


def issue_session_token(
    session: Session, *, issuer: str, audience: list[str], bound: bool = True
) -> tuple[str, int]:
    """A signed Session Token for ``session`` and its lifetime in seconds: bound to the
    Session's DPoP key, or (``bound=False``, a Bearer token for an MCP server) to none."""
    lifetime = int(authority_settings().SESSION_TOKEN_SECONDS)
    claims = TokenClaims(
        issuer=issuer,
        audience=audience[0] if len(audience) == 1 else audience,
        client_id=session.client.client_id,
        user_id=session.user_id,
        session_id=session.session_id,
        jkt=session.jkt if bound else None,
        account_id=session.account_id if session.signed_in else None,
        scope=session.scope if session.signed_in else "",
    )
    return sign_claims(claims, lifetime=lifetime), lifetime


def mint_development_token(
    *,
    user: str,
    jkt: str,
    client_id: str = development.DEFAULT_CLIENT_ID,
    scopes: Iterable[str] = (),
    account: str | None = None,
    ttl: int = 3600,
    audience: str | None = None,
    session: str | None = None,
    now: float | None = None,
) -> str:
    """A development Session Token bound to the DPoP key ``jkt`` (``poppy_token``): signed
    in with ``account``, else signed out; ``session`` (``sid``) new by default.

    Scopes are written as given; they count only for a signed-in token. Raises
    ``ImproperlyConfigured`` unless development mode runs here.
    """
    development.require_enabled()
    claims = TokenClaims(
        issuer=local_issuer.token_issuer() or development.DEFAULT_ORIGIN,
        audience=audience or development.default_audience(),
        client_id=client_id,
        user_id=user,
        session_id=session or development.new_session_id(),
        jkt=jkt,
        account_id=account,
        scope=" ".join(dict.fromkeys(scope for scope in scopes if scope)),
    )
    return sign_claims(claims, lifetime=ttl, now=now)
