"""System checks of the authorization server (``poppy_authority.E001`` ...), run by
``manage.py check`` once the app is installed.

- ``E001``: ``POPPY_AUTHORITY`` cannot be read (an unknown key, a bad ``CLIENTS``).
- ``E002``: no issuer: ``POPPY["ISSUER"]`` is unset and the development authority is off.
- ``E003``: no signing key: neither ``$POPPY_AUTHORITY_SIGNING_KEY``, ``SIGNING_KEY_FILE``
  nor the development authority's.
- ``W001``: the issuer is not https with ``DEBUG`` off: personal agents refuse it.
- ``W002``: ``POPPY["SESSION_STATUS"]`` is not the authority's callable: a sign-out leaves
  signed-in Session Tokens valid until they expire.

The optional channels' checks (``E004``, ``E005``, ``W003``, ``W004``) are in
:mod:`poppy_django.authority.channel_checks`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from poppy_django.authority import keys
from poppy_django.authority.channel_checks import check_channels
from poppy_django.authority.conf import authority_settings
from poppy_django.authority.status import session_is_active
from poppy_django.conf import debug_configured, poppy_settings
from poppy_django.verifier.local_issuer import token_issuer

STATUS_CALLABLE = "poppy_django.authority.status.session_is_active"


def check_authority(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[Any]:
    try:
        authority_settings().validate()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="poppy_authority.E001")]
    try:
        found = token_issuer()
    except ImproperlyConfigured:
        return []  # the POPPY dict itself is broken: poppy_django.E004 says how
    problems: list[Any] = []
    if not found:
        problems.append(
            checks.Error(
                'The authorization server has no issuer: set POPPY["ISSUER"].',
                id="poppy_authority.E002",
            )
        )
    elif urlsplit(found).scheme != "https" and not debug_configured():
        problems.append(
            checks.Warning(
                f"The issuer {found} is not https: personal agents refuse it.",
                hint='Serve the project over TLS and set POPPY["ISSUER"] to its https URL.',
                id="poppy_authority.W001",
            )
        )
    try:
        keys.signing_key()
    except (ImproperlyConfigured, OSError) as exc:
        problems.append(checks.Error(str(exc), id="poppy_authority.E003"))
    status = poppy_settings.raw("SESSION_STATUS")
    # Development mode alone (no deployment key, so no token endpoint's Sessions) revokes
    # only with poppy_token --revoke: no warning, as for the development authority before.
    if status not in (STATUS_CALLABLE, session_is_active) and keys.deployment_key_configured():
        problems.append(
            checks.Warning(
                "Sign-outs take effect only when Session Tokens expire.",
                hint=f'Set POPPY["SESSION_STATUS"] = "{STATUS_CALLABLE}".',
                id="poppy_authority.W002",
            )
        )
    return problems + check_channels()
