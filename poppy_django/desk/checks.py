"""A system check: the live channels are closed to non-staff only with the desk's manager.

Registered by :mod:`poppy_django.desk.seams` from ``PoppyDjangoConfig.ready()``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string

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
