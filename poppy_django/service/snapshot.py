"""A conversation as the company side reads it: :func:`get`'s :class:`ConversationState`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from poppy_django import ids
from poppy_django.errors import PoppyError
from poppy_django.models import Conversation
from poppy_django.store.lifecycle import holder


@dataclass(frozen=True)
class ConversationState:
    """A snapshot for the company side, staff-only fields included."""

    id: str
    status: str
    responder: str
    client_id: str
    account_id: str | None
    parent_id: str | None
    #: The staff member it is with (holding it, or assigned while it waits); "" for no one.
    assignee: str
    context: dict[str, Any]
    last_seq: int
    #: The id of the newest event ("" for none): a reply's ``seen`` when the staffer read
    #: everything.
    last_event_id: str
    handoff_requested_at: datetime | None
    #: "personal_agent" | "company_agent" (the last handoff's), and the Company Agent's reason.
    handoff_initiator: str
    handoff_reason: str


def last_event_id(conversation: Conversation) -> str:
    return ids.event_id(conversation.id, conversation.last_seq) if conversation.last_seq else ""


def get(conversation_id: str) -> ConversationState:
    try:
        conversation = Conversation.objects.get(pk=conversation_id)
    except Conversation.DoesNotExist as exc:
        raise PoppyError("conversation_not_found") from exc
    return ConversationState(
        id=conversation.id,
        status=conversation.status,
        responder=conversation.responder,
        client_id=conversation.client_id,
        account_id=conversation.account_id,
        parent_id=conversation.parent_id,
        assignee=holder(conversation),
        context=conversation.context,
        last_seq=conversation.last_seq,
        last_event_id=last_event_id(conversation),
        handoff_requested_at=conversation.handoff_requested_at,
        handoff_initiator=conversation.handoff_initiator,
        handoff_reason=conversation.handoff_reason,
    )
