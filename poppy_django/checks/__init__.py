"""System checks with stable ids (``poppy_django.E001`` ...), registered in ``ready()``.

The ids are a contract: they are listed in ``docs/checks.md`` and each one is tested in
``tests/ops/test_checks.py``. ``E0xx``/``W0xx`` are the core settings: the ``POPPY`` dict
(:mod:`~poppy_django.checks.poppy_dict`), production mode
(:mod:`~poppy_django.checks.production`), the Company Agent
(:mod:`~poppy_django.checks.agent`) and how the project serves it
(:mod:`~poppy_django.checks.serving`); ``E1xx``/``W1xx`` are the auth settings
(:mod:`poppy_django.verifier.checks`), run here too but only once the ``POPPY`` dict itself
is readable.

A broken ``POPPY`` dict (an unknown key, not a dict) is reported as ``E004`` instead of the
``ImproperlyConfigured`` that reading it raises everywhere else, so ``manage.py check``
names the problem rather than crashing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core import checks

from poppy_django.checks import serving
from poppy_django.checks.agent import agent_errors
from poppy_django.checks.discovery import check_discovery
from poppy_django.checks.poppy_dict import (
    Messages,
    check_id,
    import_errors,
    number_setting,
    office_hours_errors,
    poppy_dict_problem,
    range_errors,
    retention_warnings,
    text_errors,
    unknown_sub_keys,
)
from poppy_django.checks.production import (
    check_broker,
    production_checks,
    production_mode_errors,
)
from poppy_django.conf import debug_configured, poppy_settings
from poppy_django.verifier.checks import (
    check_dev_authority,
    check_dpop_verifier,
    check_fake_verifier,
)


def check_settings(app_configs: Any = None, **kwargs: Any) -> Messages:
    """Every core check; a broken POPPY dict is reported alone (E004)."""
    problem = poppy_dict_problem()
    if problem is not None:
        return [problem]
    errors: Messages = [*unknown_sub_keys(), *import_errors(), *range_errors()]
    if poppy_settings.raw("AUTHENTICATE") is None:
        errors.append(
            checks.Warning(
                "No token verifier is configured: the endpoint answers 501 not_implemented.",
                hint='Set POPPY["AUTHENTICATE"] (e.g. "poppy_django.verifier.dpop.verify").',
                id=check_id("W001"),
            )
        )
    if poppy_settings.raw("ACTIONS") not in ("approve-delegated", "reject"):
        errors.append(
            checks.Error(
                'POPPY["ACTIONS"] must be "approve-delegated" or "reject".', id=check_id("E002")
            )
        )
    heartbeat, lease = number_setting("HEARTBEAT_SECONDS"), number_setting("LEASE_SECONDS")
    if heartbeat is not None and lease is not None and heartbeat >= lease:
        errors.append(
            checks.Error(
                'POPPY["HEARTBEAT_SECONDS"] must be shorter than POPPY["LEASE_SECONDS"].',
                hint="A third of the lease is a good heartbeat.",
                id=check_id("E003"),
            )
        )
    if not settings.USE_TZ:
        errors.append(
            checks.Error(
                "USE_TZ is False: event created_at times would carry no time zone, which "
                "the wire requires (ISO 8601 UTC).",
                hint="Set USE_TZ = True (Django's default).",
                id=check_id("E009"),
            )
        )
    errors.extend(office_hours_errors())
    errors.extend(retention_warnings())
    errors.extend(text_errors())
    errors.extend(production_mode_errors())
    errors.extend(agent_errors())
    if not debug_configured():
        errors.extend(production_checks())
    return errors


def check_auth(app_configs: Any = None, **kwargs: Any) -> Messages:
    """The auth checks (E1xx, W1xx), once the POPPY dict is readable (else E004 says why)."""
    if poppy_dict_problem() is not None:
        return []
    auth_checks: tuple[Callable[..., Messages], ...] = (
        check_dev_authority,
        check_dpop_verifier,
        check_fake_verifier,
    )
    return [message for check in auth_checks for message in check(app_configs, **kwargs)]


def register(body_limit: type) -> None:
    """Called from ``PoppyDjangoConfig.ready()``: the core's and the verifier's checks (the
    desk and the issuer app register theirs). ``body_limit``: the ASGI wrapper the project's
    ``asgi.py`` should apply (``poppy_django.asgi.PoppyBodyLimit``, above this layer)."""
    serving.use_body_limit(body_limit)
    checks.register(check_settings, checks.Tags.compatibility)
    checks.register(check_discovery, checks.Tags.compatibility)
    checks.register(serving.check_routes, checks.Tags.urls)
    checks.register(serving.check_asgi_wrapper, checks.Tags.compatibility)
    checks.register(check_auth, checks.Tags.security)
    checks.register(check_broker, checks.Tags.compatibility, deploy=True)


__all__ = ["check_auth", "check_broker", "check_settings", "poppy_dict_problem", "register"]
