"""What every company-side call checks first, and what it records with what it writes: a
staff member named, the conversation open and locked, and no one else holding it (one
owner: :func:`poppy_django.store.lifecycle.holder`)."""

from __future__ import annotations

from typing import Any

from poppy_django.errors import PoppyError
from poppy_django.models import Conversation
from poppy_django.store import event_log, lifecycle


def meta(request_id: str | None, by: str) -> dict[str, Any]:
    """What the events a call causes carry for the desk: its request id, its staff member."""
    found: dict[str, Any] = {}
    if request_id:
        found["request_id"] = request_id
    if by:
        found["by"] = by
    return found


def lock_open(conversation_id: str) -> Conversation:
    """The conversation, row-locked, refused when closed."""
    conversation = event_log.lock(conversation_id)
    if lifecycle.CLOSED(conversation):
        raise PoppyError("conversation_closed", "The conversation is closed.")
    return conversation


def person(by: str) -> str:
    """``by``, refused unless it names a staff member."""
    if not isinstance(by, str) or not by.strip():
        raise PoppyError("invalid_request", "by: the staff member's username is required.")
    return by


def refuse_if_held_by_other(conversation: Conversation, by: str) -> None:
    current = lifecycle.holder(conversation)
    if current and current != by:
        raise PoppyError(
            "held_by_other",
            f"{current} has this conversation.",
            extra={"holder": current},
        )
