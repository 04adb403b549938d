"""The desk's system checks: the live channels are closed to non-staff only with the desk's
manager (W201); in production its scripts and styles are collected to be served (W202).

Registered by :mod:`poppy_django.desk.seams` from ``PoppyDjangoConfig.ready()``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string

from poppy_django.conf import debug_configured
from poppy_django.desk.channels import DeskChannelManager

CHANNEL_MANAGER = "poppy_django.desk.channels.DeskChannelManager"


def check_channel_manager(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Warn when django-eventstream would let anyone read ``poppy-desk`` through its views."""
    name = getattr(settings, "EVENTSTREAM_CHANNELMANAGER_CLASS", None)
    try:
        configured = import_string(name) if name else None
    except ImportError:
        configured = None
    if isinstance(configured, type) and issubclass(configured, DeskChannelManager):
        return []
    return [
        checks.Warning(
            "django-eventstream's channel manager does not restrict Poppy's channels: any "
            "django_eventstream view your project mounts would serve poppy-desk to anyone.",
            hint=f'Set EVENTSTREAM_CHANNELMANAGER_CLASS = "{CHANNEL_MANAGER}" (or a subclass).',
            id="poppy_django.W201",
        )
    ]


#: The desk's script every desk page loads: collected, the others are too.
DESK_SCRIPT = "poppy_django/desk/desk.js"


def check_static_files(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W202 in production: the desk's files have nowhere to be collected, or were not.

    Served by uvicorn alone, the desk was unstyled and said "Connecting…" for ever: with
    ``DEBUG`` off Django serves no static files, and nothing said so.
    """
    if debug_configured() or "django.contrib.staticfiles" not in settings.INSTALLED_APPS:
        return []
    serve = "serve STATIC_URL from it (an nginx location, or WhiteNoise: see the deployment docs)"
    if not getattr(settings, "STATIC_ROOT", None):
        return [
            checks.Warning(
                "STATIC_ROOT is not set with DEBUG=False: the support desk's scripts and styles "
                "are served by nothing, so the desk shows unstyled and never connects.",
                hint=f"Set STATIC_ROOT, run python manage.py collectstatic, and {serve}.",
                id="poppy_django.W202",
            )
        ]
    from django.contrib.staticfiles.storage import staticfiles_storage

    if not staticfiles_storage.exists(DESK_SCRIPT):
        return [
            checks.Warning(
                f"The support desk's scripts are not in STATIC_ROOT ({settings.STATIC_ROOT}): "
                "collectstatic has not run since poppy_django was installed or upgraded.",
                hint=f"Run python manage.py collectstatic, and {serve}.",
                id="poppy_django.W202",
            )
        ]
    return []
