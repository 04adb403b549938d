"""A django-eventstream channel manager that keeps Poppy's channels to desk staff.

Set ``EVENTSTREAM_CHANNELMANAGER_CLASS = "poppy_django.desk.channels.DeskChannelManager"``.
django-eventstream asks the channel manager before every read of a channel, whichever view
serves it: with this one, ``poppy-desk`` and ``poppy-<conversation id>`` (nudges with desk
request ids, reply text as it is written) are readable only with the desk permission, even
through a generic ``django_eventstream`` URL a project mounts for its own channels. Other
channels keep django-eventstream's default behaviour.
"""

from __future__ import annotations

from typing import Any

from django_eventstream.channelmanager import DefaultChannelManager

from poppy_django.desk.permissions import can_handle

#: Every channel Poppy publishes on starts with this (``poppy-desk``, ``poppy-<id>``).
POPPY_CHANNEL_PREFIX = "poppy-"


def is_poppy_channel(channel: str) -> bool:
    return channel.startswith(POPPY_CHANNEL_PREFIX)


class DeskChannelManager(DefaultChannelManager):
    """Poppy channels: desk permission only, never stored (a reader re-reads the database)."""

    def can_read_channel(self, user: Any, channel: str) -> bool:
        if is_poppy_channel(channel):
            return can_handle(user)
        return bool(super().can_read_channel(user, channel))

    def is_channel_reliable(self, channel: str) -> bool:
        # Nudges are wake-ups, not data: storing them would only add writes.
        if is_poppy_channel(channel):
            return False
        return bool(super().is_channel_reliable(channel))
