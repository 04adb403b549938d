"""The company's side: the Python API the support desk (or your own code) calls on a
conversation. The personal agent's side, behind the endpoint, is
:mod:`poppy_django.service.conversations`.

Every function takes a conversation id, works in one transaction under the conversation's
lock, and accepts ``request_id`` (echoed on the events it causes, for the desk's
correlation; never shown to personal agents) and ``by`` (who did it).

>>> from poppy_django import service
>>> service.human_joined(conversation_id, by="sam")
>>> service.post_message(conversation_id, "Hi, I am Sam.", by="sam")
>>> service.human_left(conversation_id, by="sam")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from poppy_django import handoff, ids, observe, signals
from poppy_django.engine import dispatch, transitions
from poppy_django.errors import PoppyError
from poppy_django.models import Conversation, Event, EventType, Responder, Status
from poppy_django.service import conversations
from poppy_django.store import event_log


@dataclass(frozen=True)
class ConversationState:
    """A snapshot for the company side, staff-only fields included."""

    id: str
    status: str
    responder: str
    client_id: str
    account_id: str | None
    parent_id: str | None
    assignee: str
    context: dict[str, Any]
    last_seq: int


def _meta(request_id: str | None, by: str) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if request_id:
        meta["request_id"] = request_id
    if by:
        meta["by"] = by
    return meta


def _open(conversation_id: str) -> Conversation:
    conversation = event_log.lock(conversation_id)
    if conversation.status == Status.CLOSED:
        raise PoppyError("conversation_closed", "The conversation is closed.")
    return conversation


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
        assignee=conversation.assignee,
        context=conversation.context,
        last_seq=conversation.last_seq,
    )


@transaction.atomic
def human_joined(conversation_id: str, *, by: str = "", request_id: str | None = None) -> None:
    """A person takes the conversation: idle/human; the agent stays out until they leave."""
    conversation = _open(conversation_id)
    conversation.assignee = by
    conversation.handoff_requested_at = None
    conversation.save(update_fields=["assignee", "handoff_requested_at", "updated_at"])
    event_log.set_state(
        conversation, status=Status.IDLE, responder=Responder.HUMAN, meta=_meta(request_id, by)
    )
    observe.moment("human_joined", signals.human_joined, conversation_id=conversation.id, by=by)


@transaction.atomic
def post_message(
    conversation_id: str,
    text: str,
    *,
    data: dict[str, Any] | None = None,
    by: str = "",
    request_id: str | None = None,
) -> Event:
    """A message written by a person (``sender: "human"``)."""
    if not text.strip():
        raise PoppyError("invalid_request", "A message needs text.")
    conversation = _open(conversation_id)
    return event_log.append_company_message(
        conversation,
        message_id=ids.new_company_message_id(),
        text=text,
        sender="human",
        data=data,
        meta=_meta(request_id, by),
    )


@transaction.atomic
def human_left(conversation_id: str, *, by: str = "", request_id: str | None = None) -> None:
    """Back to the agent; messages it has not answered yet start a turn."""
    conversation = _open(conversation_id)
    conversation.assignee = ""
    conversation.handoff_requested_at = None
    conversation.save(update_fields=["assignee", "handoff_requested_at", "updated_at"])
    unanswered = bool(transitions.pending_messages(conversation))
    status = Status.WORKING if unanswered else Status.IDLE
    event_log.set_state(
        conversation, status=status, responder=Responder.AGENT, meta=_meta(request_id, by)
    )
    if unanswered:
        dispatch.dispatch_on_commit(conversation.id)
    observe.moment("human_left", signals.human_left, conversation_id=conversation.id, by=by)


@transaction.atomic
def handoff_unavailable(
    conversation_id: str, reason: str, *, by: str = "", request_id: str | None = None
) -> None:
    """No one can take the queued handoff: say why; the agent keeps the conversation."""
    conversation = _open(conversation_id)
    if conversation.status != Status.QUEUED:
        raise PoppyError("invalid_request", "No handoff is waiting for a person.")
    handoff.unavailable(conversation, reason, meta=_meta(request_id, by))


@transaction.atomic
def hand_off(conversation_id: str, *, request_id: str | None = None) -> str:
    """The Company Agent hands off on its own initiative (through the request hook)."""
    conversation = _open(conversation_id)
    return handoff.request(conversation, initiator="company_agent", meta=_meta(request_id, ""))


@transaction.atomic
def request_user(
    conversation_id: str, reason: str, *, by: str = "", request_id: str | None = None
) -> Event:
    """Ask the personal agent to bring the User (it may open a Direct Conversation)."""
    conversation = _open(conversation_id)
    if conversation.is_direct:
        raise PoppyError("invalid_request", "A Direct Conversation already has the User.")
    event = event_log.append(
        conversation, EventType.USER_REQUESTED, {"reason": reason}, meta=_meta(request_id, by)
    )
    observe.moment(
        "user_requested", signals.user_requested, conversation_id=conversation.id, reason=reason
    )
    return event


@transaction.atomic
def close(conversation_id: str, *, by: str = "", request_id: str | None = None) -> None:
    """Close from the company side (its open Direct Conversation first)."""
    conversations.lock_parent_first(conversation_id)
    conversation = event_log.lock(conversation_id)
    conversations.close_locked(conversation, by=by or "company", meta=_meta(request_id, by))
