"""System checks with stable ids (``poppy_django.E001`` ...), registered in ``ready()``."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from poppy_django.conf import DEFAULTS, poppy_settings


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    try:
        verifier = poppy_settings.AUTHENTICATE
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="poppy_django.E001")]
    if verifier is None:
        errors.append(
            checks.Warning(
                "No token verifier is configured: the endpoint answers 501 not_implemented.",
                hint='Set POPPY["AUTHENTICATE"] (e.g. "poppy_django.auth.dpop.verify").',
                id="poppy_django.W001",
            )
        )
    if poppy_settings.raw("ACTIONS") not in ("approve-delegated", "reject"):
        errors.append(
            checks.Error(
                'POPPY["ACTIONS"] must be "approve-delegated" or "reject".', id="poppy_django.E002"
            )
        )
    if float(poppy_settings.HEARTBEAT_SECONDS) >= float(poppy_settings.LEASE_SECONDS):
        errors.append(
            checks.Error(
                'POPPY["HEARTBEAT_SECONDS"] must be shorter than POPPY["LEASE_SECONDS"].',
                id="poppy_django.E003",
            )
        )
    if not settings.DEBUG:
        errors.extend(_production_checks())
    return errors


def _production_checks() -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    if poppy_settings.raw("EXECUTOR") == DEFAULTS["EXECUTOR"]:
        errors.append(
            checks.Warning(
                "Turns run in in-process threads with DEBUG=False: one process only.",
                hint='Set POPPY["EXECUTOR"] = "poppy_django.executors.CeleryExecutor".',
                id="poppy_django.W002",
            )
        )
    if not getattr(settings, "EVENTSTREAM_REDIS", None):
        errors.append(
            checks.Warning(
                "Wake-ups and text deltas stay in this process (EVENTSTREAM_REDIS is unset) "
                "with DEBUG=False: readers on other processes wait for the fallback re-read.",
                hint="Set EVENTSTREAM_REDIS to your Redis connection.",
                id="poppy_django.W003",
            )
        )
    return errors


def register() -> None:
    checks.register(check_settings, checks.Tags.compatibility)
