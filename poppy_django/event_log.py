"""Appending to a conversation's event log, under the conversation's row lock.

Every write path (personal agent requests, turns, the company side) goes through here, so
sequence numbers are gap-free per conversation and every append wakes readers on commit.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from poppy_django import fanout
from poppy_django.errors import PoppyError
from poppy_django.models import Conversation, Event, EventType, Status


def lock(conversation_id: str) -> Conversation:
    """The conversation, row-locked until the surrounding transaction ends."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("poppy_django.event_log.lock() needs a transaction.atomic() block.")
    try:
        return Conversation.objects.select_for_update().get(pk=conversation_id)
    except Conversation.DoesNotExist as exc:
        raise PoppyError("conversation_not_found") from exc


def append(
    conversation: Conversation,
    type: EventType | str,
    payload: dict[str, Any],
    *,
    meta: dict[str, Any] | None = None,
    message_id: str | None = None,
    role: str = "",
) -> Event:
    """Append one event to a locked conversation and wake its readers when this commits."""
    conversation.last_seq += 1
    event = Event.objects.create(
        conversation=conversation,
        seq=conversation.last_seq,
        type=type,
        payload=payload,
        meta=meta or {},
        message_id=message_id,
        role=role,
    )
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=conversation.last_seq)
    fanout.nudge_on_commit(
        conversation.id,
        conversation.last_seq,
        {"type": str(type), "request_id": (meta or {}).get("request_id")},
    )
    return event


def set_state(
    conversation: Conversation,
    *,
    status: Status | str | None = None,
    responder: str | None = None,
    meta: dict[str, Any] | None = None,
) -> Event | None:
    """Change status and/or responder; a ``state`` event records every actual change."""
    new_status = status or conversation.status
    new_responder = responder or conversation.responder
    if new_status == conversation.status and new_responder == conversation.responder:
        return None
    conversation.status = new_status
    conversation.responder = new_responder
    conversation.save(update_fields=["status", "responder", "updated_at"])
    return append(
        conversation,
        EventType.STATE,
        {"status": str(new_status), "responder": str(new_responder)},
        meta=meta,
    )


def message_payload(
    *,
    message_id: str,
    role: str,
    sender: str,
    text: str | None = None,
    data: dict[str, Any] | None = None,
    context: dict[str, Any] | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"id": message_id, "role": role, "sender": sender}
    if text is not None:
        message["text"] = text
    if data is not None:
        message["data"] = data
    if context is not None:
        message["context"] = context
    return {"message": message}


def append_company_message(
    conversation: Conversation,
    *,
    message_id: str,
    text: str,
    sender: str = "agent",
    data: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> Event:
    """A message from the company (the Company Agent, or a person when ``sender="human"``)."""
    payload = message_payload(
        message_id=message_id, role="company", sender=sender, text=text, data=data or None
    )
    return append(
        conversation,
        EventType.MESSAGE,
        payload,
        meta=meta,
        message_id=message_id,
        role="company",
    )
