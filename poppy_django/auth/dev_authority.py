"""Deprecated: the development authority is the authority app's development mode now.

Kept one release for the import paths the docs named: ``SESSION_STATUS =
"poppy_django.auth.dev_authority.session_active"`` and ``mint_token``. Both answer through
the issuer app's :mod:`~poppy_django.verifier.local_issuer` registration (this module imports no
issuer). Use ``"poppy_django.authority.status.session_is_active"`` and
:func:`poppy_django.authority.tokens.mint_development_token`, with ``"poppy_django.authority"``
in ``INSTALLED_APPS``.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

from django.core.exceptions import ImproperlyConfigured

from poppy_django.verifier import local_issuer
from poppy_django.verifier.principal import Principal


def _issuer(name: str, instead: str) -> local_issuer.LocalIssuer:
    warnings.warn(
        f"poppy_django.auth.dev_authority.{name} is deprecated; use {instead}.",
        DeprecationWarning,
        stacklevel=3,
    )
    local = local_issuer.registered()
    if local is None:
        raise ImproperlyConfigured(
            "The development authority is the authority app's development mode: add "
            '"poppy_django.authority" to INSTALLED_APPS.'
        )
    return local


def session_active(principal: Principal) -> bool | Literal["signed_out"]:
    """Deprecated alias of ``poppy_django.authority.status.session_is_active``."""
    return _issuer(
        "session_active", "poppy_django.authority.status.session_is_active"
    ).session_status(principal)


def mint_token(**kwargs: Any) -> str:
    """Deprecated alias of ``poppy_django.authority.tokens.mint_development_token``."""
    local = _issuer("mint_token", "poppy_django.authority.tokens.mint_development_token")
    return local.mint_development_token(**kwargs)
