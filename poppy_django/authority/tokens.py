"""Session Tokens: short-lived JWTs bound to a DPoP key, in the default verifier's format.

The claims are the ones :mod:`poppy_django.auth.dpop` reads (names from
``POPPY["TOKENS"]["CLAIMS"]``), so the endpoint verifies the authority's tokens locally with
the same key, issuer and audience, no HTTP round trip.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import jwt

from poppy_django.auth.options import parse_options
from poppy_django.authority.conf import authority_settings
from poppy_django.authority.keys import ALGORITHM, jwks_of, signing_key
from poppy_django.authority.models import Session
from poppy_django.conf import poppy_settings

TOKEN_TYPE = "at+jwt"


def _set(payload: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    target = payload
    for parent in parents:
        target = target.setdefault(parent, {})
    target[leaf] = value


def issue_session_token(session: Session, *, issuer: str, audience: list[str]) -> tuple[str, int]:
    """A signed Session Token for ``session`` and its lifetime in seconds."""
    names = parse_options(poppy_settings.TOKENS).claims
    lifetime = int(authority_settings().SESSION_TOKEN_SECONDS)
    issued = int(time.time())
    payload: dict[str, Any] = {
        "iss": issuer,
        "aud": audience[0] if len(audience) == 1 else audience,
        "iat": issued,
        "nbf": issued,
        "exp": issued + lifetime,
        "jti": secrets.token_urlsafe(16),
    }
    values: dict[str, Any] = {
        "client_id": session.client.client_id,
        "user_id": session.user_id,
        "session_id": session.session_id,
        "signed_in": session.signed_in,
        "jkt": session.jkt,
    }
    if session.signed_in:
        values["account_id"] = session.account_id
        if session.scope:
            values["scope"] = session.scope
    for name, value in values.items():
        _set(payload, names[name], value)
    key = signing_key()
    headers = {"kid": jwks_of(key)["keys"][0]["kid"], "typ": TOKEN_TYPE}
    return jwt.encode(payload, key, algorithm=ALGORITHM, headers=headers), lifetime
