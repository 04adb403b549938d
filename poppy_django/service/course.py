"""Where the conversation goes next, from the company side: to people at the Company
Agent's own initiative (:func:`hand_off`), back to the agent when no one can take it
(:func:`handoff_unavailable`), to the User (:func:`request_user`), or to its end
(:func:`close`)."""

from __future__ import annotations

from django.db import transaction

from poppy_django import handoff, observe, signals
from poppy_django.errors import PoppyError
from poppy_django.models import Event, EventType, HandoffOutcome
from poppy_django.service import conversations, guards
from poppy_django.staff import handoffs
from poppy_django.store import event_log, lifecycle


@transaction.atomic
def handoff_unavailable(
    conversation_id: str, reason: str, *, by: str, request_id: str | None = None
) -> None:
    """No one can take the queued handoff: say why; the agent keeps the conversation.

    Refused when it is not waiting for a person (``not_waiting``), or is assigned to another
    staff member (``held_by_other``).
    """
    guards.person(by)
    conversation = guards.lock_open(conversation_id)
    if not lifecycle.QUEUED(conversation):
        raise PoppyError("not_waiting", "No handoff is waiting for a person.")
    guards.refuse_if_held_by_other(conversation, by)
    handoffs.not_taken(conversation, HandoffOutcome.UNAVAILABLE, reason, by=by)
    handoff.unavailable(conversation, reason, meta=guards.meta(request_id, by))
    observe.moment("handoff_declined", None, conversation_id=conversation.id, by=by)


@transaction.atomic
def hand_off(conversation_id: str, *, reason: str = "", request_id: str | None = None) -> str:
    """The Company Agent hands off on its own initiative (through the request hook);
    ``reason`` is shown to staff. Returns the outcome ("queued", "unavailable"...)."""
    conversation = guards.lock_open(conversation_id)
    return handoff.request(
        conversation, initiator="company_agent", reason=reason, meta=guards.meta(request_id, "")
    )


@transaction.atomic
def request_user(
    conversation_id: str, reason: str, *, by: str, request_id: str | None = None
) -> Event:
    """Ask the personal agent to bring the User (it may open a Direct Conversation).

    Refused (``held_by_other``) when another staff member has the conversation.
    """
    guards.person(by)
    conversation = guards.lock_open(conversation_id)
    guards.refuse_if_held_by_other(conversation, by)
    if conversation.is_direct:
        raise PoppyError("invalid_request", "A Direct Conversation already has the User.")
    event = event_log.append(
        conversation,
        EventType.USER_REQUESTED,
        {"reason": reason},
        meta=guards.meta(request_id, by),
    )
    observe.moment(
        "user_requested", signals.user_requested, conversation_id=conversation.id, reason=reason
    )
    return event


@transaction.atomic
def close(conversation_id: str, *, by: str, request_id: str | None = None) -> None:
    """Close from the company side (its open Direct Conversation first).

    Refused (``held_by_other``) when another staff member has the conversation.
    """
    guards.person(by)
    conversations.lock_parent_first(conversation_id)
    conversation = event_log.lock(conversation_id)
    guards.refuse_if_held_by_other(conversation, by)
    conversations.close_locked(conversation, by=by, meta=guards.meta(request_id, by))
