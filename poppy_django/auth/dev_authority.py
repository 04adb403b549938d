"""The development authority: mints DPoP-bound Session Tokens for the example project and tests.

Switched on by ``POPPY["DEV_AUTHORITY"]`` (``True``, or a dict with ``KEY_FILE`` and
``ALLOW_WITHOUT_DEBUG``). Anyone with shell access mints any token, so it works only with
``DEBUG`` on: with ``DEBUG`` off it is refused at run time (no tokens minted, none trusted, its
JWKS 404) — a system check is not enough, since ASGI servers run none — unless the deployment
opts in by name with ``"ALLOW_WITHOUT_DEBUG": True`` (the example project does so for
``POPPY_DEV_AUTHORITY=1``, to be measured production-like).

The ES256 signing key comes from the environment variable ``POPPY_DEV_SIGNING_KEY`` (a PEM),
else from ``KEY_FILE`` (default ``<BASE_DIR>/var/poppy-dev-signing-key.pem``), created on first
use. A file, not the database or the cache: every process of the example project (uvicorn
workers, Celery, ``manage.py poppy_token``) reads the same key with SQLite or PostgreSQL and
with or without Redis, and creating it is atomic (``os.link``), so two processes starting at
once agree on one key. Several machines need the environment variable.

The issuer is ``POPPY["ISSUER"]``, else the origin of ``POPPY["BASE_URL"]``, else
:data:`DEFAULT_ORIGIN` (the one default ``poppy_token`` and ``poppy_chat`` also use); its JWKS
is served by :func:`jwks_view`. Sessions it minted can be revoked (``poppy_token --revoke``):
:func:`session_active` is its ``POPPY["SESSION_STATUS"]`` callable.
"""

from __future__ import annotations

import functools
import os
import secrets
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.http import HttpRequest, JsonResponse

from poppy_django import addresses
from poppy_django.auth.jwk import public_jwk, thumbprint
from poppy_django.auth.principal import Principal
from poppy_django.conf import poppy_settings
from poppy_django.errors import error_response
from poppy_django.files import made_once

ENV_KEY = "POPPY_DEV_SIGNING_KEY"
KEY_FILE_NAME = "poppy-dev-signing-key.pem"
DEFAULT_ORIGIN = addresses.DEFAULT_DEV_ORIGIN
DEFAULT_CLIENT_ID = "https://agent.example/dev-client"
ALGORITHM = "ES256"
TOKEN_TYPE = "at+jwt"


def configured() -> bool:
    """Whether ``POPPY["DEV_AUTHORITY"]`` is on (whether or not it may run here)."""
    return bool(poppy_settings.DEV_AUTHORITY)


def allowed_without_debug() -> bool:
    """The deployment's explicit opt-in: ``DEV_AUTHORITY["ALLOW_WITHOUT_DEBUG"] is True``."""
    return _options().get("ALLOW_WITHOUT_DEBUG") is True


def enabled() -> bool:
    """Whether the authority runs: configured, and DEBUG on or explicitly allowed without."""
    return configured() and (bool(settings.DEBUG) or allowed_without_debug())


def disabled_reason() -> str:
    """Why :func:`enabled` is False, in words a developer can act on."""
    if not configured():
        return 'POPPY["DEV_AUTHORITY"] is off: no development tokens.'
    return (
        'POPPY["DEV_AUTHORITY"] is refused with DEBUG=False (anyone who can run poppy_token '
        'could act for any User); set DEV_AUTHORITY["ALLOW_WITHOUT_DEBUG"] = True to run it '
        "anyway, never where others can reach it."
    )


def _options() -> Mapping[str, Any]:
    value = poppy_settings.DEV_AUTHORITY
    return value if isinstance(value, Mapping) else {}


def key_file() -> Path:
    """Where the generated key is kept (``DEV_AUTHORITY["KEY_FILE"]`` or ``BASE_DIR/var``)."""
    configured = _options().get("KEY_FILE")
    if configured:
        return Path(configured)
    base = getattr(settings, "BASE_DIR", None) or os.getcwd()
    return Path(base) / "var" / KEY_FILE_NAME


def _load_pem(pem: bytes, origin: str) -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"The development signing key in {origin} is not a PEM."
        ) from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ImproperlyConfigured(f"The development signing key in {origin} is not P-256 (ES256).")
    return key


def _create_or_read(path: Path) -> ec.EllipticCurvePrivateKey:
    def new_key() -> bytes:
        return ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    return _load_pem(made_once(path, new_key), str(path))


@functools.lru_cache(maxsize=4)
def _signing_key(env_pem: str | None, path: str) -> ec.EllipticCurvePrivateKey:
    if env_pem:
        return _load_pem(env_pem.encode(), f"${ENV_KEY}")
    return _create_or_read(Path(path))


def signing_key() -> ec.EllipticCurvePrivateKey:
    """The authority's private key (cached per process)."""
    return _signing_key(os.environ.get(ENV_KEY) or None, str(key_file()))


def public_jwks() -> dict[str, Any]:
    """The JWKS of the authority: one ES256 key, its ``kid`` its RFC 7638 thumbprint."""
    jwk = public_jwk(signing_key().public_key())
    return {"keys": [{**jwk, "kid": thumbprint(jwk), "alg": ALGORITHM, "use": "sig"}]}


def issuer() -> str:
    """``POPPY["ISSUER"]``, else the public origin from ``BASE_URL``, else ``DEFAULT_ORIGIN``."""
    return addresses.dev_issuer()


def default_audience(url: str | None = None) -> str:
    """The endpoint URL a minted token names: ``url``'s origin, else the configured public
    origin, else ``DEFAULT_ORIGIN``, + ``PATH``."""
    origin = addresses.origin_of(url) if url else addresses.configured_origin()
    return addresses.endpoint_url(origin or DEFAULT_ORIGIN)


def mint_token(
    *,
    user: str,
    jkt: str,
    client_id: str = DEFAULT_CLIENT_ID,
    scopes: Iterable[str] = (),
    account: str | None = None,
    ttl: int = 3600,
    audience: str | None = None,
    session: str | None = None,
    now: float | None = None,
) -> str:
    """A Session Token bound to the DPoP key ``jkt``: signed in with ``account``, else signed out.

    Scopes are written as given; they count only for a signed-in token (the turn gives the
    ``scope:<s>`` roles only then). ``session`` is the session id (``sid``), new by default.
    """
    if not enabled():
        raise ImproperlyConfigured(disabled_reason())
    issued = int(time.time() if now is None else now)
    names = poppy_settings.token_options.claims
    payload: dict[str, Any] = {
        "iss": issuer(),
        "aud": audience or default_audience(),
        "iat": issued,
        "nbf": issued,
        "exp": issued + int(ttl),
        "jti": secrets.token_urlsafe(16),
    }
    values: dict[str, Any] = {
        "jkt": jkt,
        "client_id": client_id,
        "user_id": user,
        "session_id": session or new_session_id(),
        "signed_in": account is not None,
    }
    scope_list = [scope for scope in scopes if scope]
    if scope_list:
        values["scope"] = " ".join(dict.fromkeys(scope_list))
    if account is not None:
        values["account_id"] = account
    for name, value in values.items():
        # A dotted claim name is nested: "cnf.jkt" is {"cnf": {"jkt": ...}}.
        *parents, leaf = names[name].split(".")
        target = payload
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    jwks = public_jwks()
    headers = {"kid": jwks["keys"][0]["kid"], "typ": TOKEN_TYPE}
    return jwt.encode(payload, signing_key(), algorithm=ALGORITHM, headers=headers)


def new_session_id() -> str:
    """A fresh session id (``sid``) in the id alphabet."""
    return "ses_" + secrets.token_urlsafe(12)


def revoke(session_id: str) -> bool:
    """End a session: its tokens are refused from the next request on.

    Stored in the database, so every process (web, worker, another machine) sees it; False
    when it was already revoked.
    """
    from poppy_django.models import RevokedSession

    if not enabled():
        raise ImproperlyConfigured(disabled_reason())
    from poppy_django.auth.sessions import revoked

    _, created = RevokedSession.objects.get_or_create(session_id=session_id)
    transaction.on_commit(lambda: revoked(session_id))  # every process, before returning
    return created


def session_active(principal: Principal) -> bool:
    """``POPPY["SESSION_STATUS"]`` for the authority's tokens: active unless revoked."""
    from poppy_django.models import RevokedSession

    if principal.session_id is None:
        return True
    return not RevokedSession.objects.filter(session_id=principal.session_id).exists()


def jwks_view(request: HttpRequest) -> JsonResponse:
    """``GET`` the authority's JWKS (404 when the authority is off)."""
    if not enabled():
        return error_response("not_found")
    response = JsonResponse(public_jwks())
    response["Cache-Control"] = "public, max-age=300"
    response["Access-Control-Allow-Origin"] = "*"
    return response
