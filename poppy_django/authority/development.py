"""The authority's development mode: a generated key, ``poppy_token``, no OAuth client needed.

Switched on by ``POPPY["DEV_AUTHORITY"]`` (``True``, or a dict with ``KEY_FILE`` and
``ALLOW_WITHOUT_DEBUG``). Anyone with shell access mints any token, so it works only with
``DEBUG`` on: with ``DEBUG`` off it is refused at run time (no tokens minted, none trusted, its
JWKS 404) — a system check is not enough, since ASGI servers run none — unless the deployment
opts in by name with ``"ALLOW_WITHOUT_DEBUG": True`` (the example project does so for
``POPPY_DEV_AUTHORITY=1``, to be measured production-like).

The key (:mod:`poppy_django.authority.keys`) comes from ``$POPPY_DEV_SIGNING_KEY`` (a PEM),
else from ``KEY_FILE`` (default ``<BASE_DIR>/var/poppy-dev-signing-key.pem``), created on
first use: a file, so every process of a project (uvicorn workers, Celery, ``manage.py
poppy_token``) reads the same key with SQLite or PostgreSQL and with or without Redis.

The issuer is ``POPPY["ISSUER"]``, else the origin of ``POPPY["BASE_URL"]``, else
``http://127.0.0.1:8000`` (:data:`poppy_django.addresses.DEFAULT_DEV_ORIGIN`). Tokens it
mints are the authority's own format (:func:`poppy_django.authority.tokens.sign_claims`).

Needs neither Authlib nor httpx: the no-extras install keeps a working development mode.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from poppy_django import addresses
from poppy_django.authority.models import RevokedSession
from poppy_django.conf import debug_configured, poppy_settings
from poppy_django.verifier.sessions import revoked

ENV_KEY = "POPPY_DEV_SIGNING_KEY"
KEY_FILE_NAME = "poppy-dev-signing-key.pem"
DEFAULT_ORIGIN = addresses.DEFAULT_DEV_ORIGIN
DEFAULT_CLIENT_ID = "https://agent.example/dev-client"


def configured() -> bool:
    """Whether ``POPPY["DEV_AUTHORITY"]`` is on (whether or not it may run here)."""
    return bool(poppy_settings.DEV_AUTHORITY)


def _options() -> Mapping[str, Any]:
    value = poppy_settings.DEV_AUTHORITY
    return value if isinstance(value, Mapping) else {}


def allowed_without_debug() -> bool:
    """The deployment's explicit opt-in: ``DEV_AUTHORITY["ALLOW_WITHOUT_DEBUG"] is True``."""
    return _options().get("ALLOW_WITHOUT_DEBUG") is True


def enabled() -> bool:
    """Whether development mode runs: configured, and DEBUG on or explicitly allowed without."""
    return configured() and (debug_configured() or allowed_without_debug())


def disabled_reason() -> str:
    """Why :func:`enabled` is False, in words a developer can act on."""
    if not configured():
        return 'POPPY["DEV_AUTHORITY"] is off: no development tokens.'
    return (
        'POPPY["DEV_AUTHORITY"] is refused with DEBUG=False (anyone who can run poppy_token '
        'could act for any User); set DEV_AUTHORITY["ALLOW_WITHOUT_DEBUG"] = True to run it '
        "anyway, never where others can reach it."
    )


def require_enabled() -> None:
    """``ImproperlyConfigured`` (saying why) unless development mode runs."""
    if not enabled():
        raise ImproperlyConfigured(disabled_reason())


def key_file() -> Path:
    """Where the generated key is kept (``DEV_AUTHORITY["KEY_FILE"]`` or ``BASE_DIR/var``)."""
    path = _options().get("KEY_FILE")
    if path:
        return Path(path)
    base = getattr(settings, "BASE_DIR", None) or os.getcwd()
    return Path(base) / "var" / KEY_FILE_NAME


def default_issuer() -> str | None:
    """The issuer of development tokens when ``POPPY["ISSUER"]`` is unset; None when off."""
    if not enabled():
        return None
    return addresses.configured_origin() or DEFAULT_ORIGIN


def default_audience(url: str | None = None) -> str:
    """The endpoint URL a minted token names: ``url``'s origin, else the configured public
    origin, else :data:`DEFAULT_ORIGIN`, + ``PATH``."""
    origin = addresses.origin_of(url) if url else addresses.configured_origin()
    return addresses.endpoint_url(origin or DEFAULT_ORIGIN)


def new_session_id() -> str:
    """A fresh session id (``sid``) in the id alphabet."""
    return "ses_" + secrets.token_urlsafe(12)


def revoke(session_id: str) -> bool:
    """End a development session: its tokens are refused from the next request on.

    Stored in the database, so every process (web, worker, another machine) sees it; every
    process's status cache is then told (:func:`poppy_django.verifier.sessions.revoked`).
    False when it was already revoked.
    """
    require_enabled()
    _, created = RevokedSession.objects.get_or_create(session_id=session_id)
    transaction.on_commit(lambda: revoked(session_id))  # every process, before returning
    return created
