"""Acme's handoff hooks: a request goes to the support desk's queue when someone is there.

The request hook wraps the app's default (:func:`poppy_django.handoff.queue_on_desk`: office
hours, staff presence) to log each request: a project's own hook can decide otherwise.
"""

from __future__ import annotations

import logging
from typing import Any

from poppy_django.handoff import queue_on_desk

logger = logging.getLogger(__name__)


def request_handoff(*, conversation_id: str, initiator: str) -> str | dict[str, str]:
    """Queued for the desk while someone is available in office hours; else unavailable."""
    outcome = queue_on_desk(conversation_id=conversation_id, initiator=initiator)
    logger.info("desk: %s asked for a person (%s): %s", conversation_id, initiator, outcome)
    return outcome


def forward_message(*, conversation_id: str, message: dict[str, Any]) -> None:
    """The desk reads transcripts live, so a forwarded message needs no extra delivery."""
    logger.info("desk: new message %s in %s", message.get("id"), conversation_id)


def cancel_handoff(*, conversation_id: str) -> None:
    logger.info("desk: handoff of %s cancelled (closed)", conversation_id)
