"""What every company-side call checks first, and what it records with what it writes: a
staff member named, the conversation open and locked, and whom it is with (one owner)."""

from __future__ import annotations

from typing import Any

from poppy_django.errors import PoppyError
from poppy_django.models import Conversation, Responder, Status
from poppy_django.store import event_log


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
    if conversation.status == Status.CLOSED:
        raise PoppyError("conversation_closed", "The conversation is closed.")
    return conversation


def person(by: str) -> str:
    """``by``, refused unless it names a staff member."""
    if not isinstance(by, str) or not by.strip():
        raise PoppyError("invalid_request", "by: the staff member's username is required.")
    return by


def holder(conversation: Conversation) -> str:
    """Whom the conversation is with now ("" for no one): its holder, or its assignee while
    it waits for a person. Closed and agent-handled conversations are with no one."""
    handed = conversation.responder == Responder.HUMAN or conversation.status == Status.QUEUED
    return conversation.assignee if handed and conversation.status != Status.CLOSED else ""


def refuse_if_held_by_other(conversation: Conversation, by: str) -> None:
    current = holder(conversation)
    if current and current != by:
        raise PoppyError(
            "held_by_other",
            f"{current} has this conversation.",
            extra={"holder": current},
        )


def holds(conversation: Conversation, by: str) -> bool:
    """Whether ``by`` holds the conversation (joined it, and the agent stays out)."""
    return conversation.responder == Responder.HUMAN and conversation.assignee == by
