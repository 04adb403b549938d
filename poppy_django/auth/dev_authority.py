"""The development authority: mints DPoP-bound Session Tokens for the example project and tests.

Switched on by ``POPPY["DEV_AUTHORITY"]`` (``True``, or ``{"KEY_FILE": path}``) and refused by
check ``poppy_django.E101`` when ``DEBUG`` is off: anyone with shell access mints any token.

The ES256 signing key comes from the environment variable ``POPPY_DEV_SIGNING_KEY`` (a PEM),
else from ``KEY_FILE`` (default ``<BASE_DIR>/var/poppy-dev-signing-key.pem``), created on first
use. A file, not the database or the cache: every process of the example project (uvicorn
workers, Celery, ``manage.py poppy_token``) reads the same key with SQLite or PostgreSQL and
with or without Redis, and creating it is atomic (``os.link``), so two processes starting at
once agree on one key. Several machines need the environment variable.

The issuer is ``POPPY["ISSUER"]``, else the origin of ``POPPY["BASE_URL"]``, else
``http://localhost:8000``; its JWKS is served by :func:`jwks_view`.
"""

from __future__ import annotations

import functools
import os
import secrets
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, JsonResponse

from poppy_django import addresses
from poppy_django.auth.jwk import public_jwk, thumbprint
from poppy_django.conf import poppy_settings
from poppy_django.errors import error_response

ENV_KEY = "POPPY_DEV_SIGNING_KEY"
KEY_FILE_NAME = "poppy-dev-signing-key.pem"
DEFAULT_ORIGIN = addresses.DEFAULT_DEV_ORIGIN
DEFAULT_CLIENT_ID = "https://agent.example/dev-client"
ALGORITHM = "ES256"
TOKEN_TYPE = "at+jwt"


def enabled() -> bool:
    """Whether ``POPPY["DEV_AUTHORITY"]`` is on."""
    return bool(poppy_settings.DEV_AUTHORITY)


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
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".poppy-key-")
        try:
            os.write(fd, pem)
            os.close(fd)
            # link() fails if another process created the file first: then we use theirs.
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    return _load_pem(path.read_bytes(), str(path))


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
    """``POPPY["ISSUER"]``, else the public origin from ``BASE_URL``, else localhost:8000."""
    return addresses.dev_issuer()


def default_audience() -> str:
    """The endpoint URL a minted token names: the configured public origin + ``PATH``."""
    return addresses.endpoint_url(addresses.configured_origin() or DEFAULT_ORIGIN)


def mint_token(
    *,
    user: str,
    jkt: str,
    client_id: str = DEFAULT_CLIENT_ID,
    scopes: Iterable[str] = (),
    account: str | None = None,
    ttl: int = 3600,
    audience: str | None = None,
    now: float | None = None,
) -> str:
    """A Session Token bound to the DPoP key ``jkt``: signed in with ``account``, else signed out.

    Scopes are written as given; they count only for a signed-in token (the turn gives the
    ``scope:<s>`` roles only then).
    """
    if not enabled():
        raise ImproperlyConfigured('POPPY["DEV_AUTHORITY"] is off: no development tokens.')
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
        "session_id": "ses_" + secrets.token_urlsafe(12),
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


def jwks_view(request: HttpRequest) -> JsonResponse:
    """``GET`` the authority's JWKS (404 when the authority is off)."""
    if not enabled():
        return error_response("not_found")
    response = JsonResponse(public_jwks())
    response["Cache-Control"] = "public, max-age=300"
    response["Access-Control-Allow-Origin"] = "*"
    return response
