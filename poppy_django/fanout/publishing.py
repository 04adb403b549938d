"""Publishing wake-ups and text deltas with django-eventstream's ``send_event``.

What is published is only a nudge ("conversation X has new events", sent once the write
commits) or a piece of a reply being written: a woken reader always re-reads the database,
so a lost nudge loses nothing (the watchdog catches it).
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django_eventstream import send_event

logger = logging.getLogger("poppy_django.fanout")

#: The eventstream type of a nudge and of a text delta on a conversation's channel.
NUDGE = "poppy.nudge"
DELTA = "poppy.delta"
#: The desk's channel: every conversation's changes, for staff browsers.
DESK_CHANNEL = "poppy-desk"


def conversation_channel(conversation_id: str) -> str:
    return f"poppy-{conversation_id}"


def _send(channel: str, event_type: str, data: dict[str, Any]) -> None:
    try:
        send_event(channel, event_type, data)
    except Exception:
        # A lost nudge is recovered by the readers' watchdog; never fail a write.
        logger.warning("poppy: could not publish %s on %s", event_type, channel, exc_info=True)


def nudge_on_commit(conversation_id: str, last_seq: int, summary: dict[str, Any]) -> None:
    """After the surrounding transaction commits, wake the conversation's readers and the desk."""

    def publish() -> None:
        _send(conversation_channel(conversation_id), NUDGE, {"seq": last_seq})
        _send(DESK_CHANNEL, NUDGE, {"conversation_id": conversation_id, "seq": last_seq, **summary})

    transaction.on_commit(publish)


def publish_delta(conversation_id: str, message_id: str, text: str) -> None:
    """Relay a piece of a reply being written; it is never stored."""
    _send(conversation_channel(conversation_id), DELTA, {"message_id": message_id, "text": text})
