"""One owner: a staff member joins (or takes over), replies over the last event they read,
and leaves; the Company Agent stays out while they hold the conversation."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from poppy_django import ids, observe, signals
from poppy_django.engine import dispatch
from poppy_django.errors import PoppyError
from poppy_django.models import (
    Conversation,
    DeskEventKind,
    Event,
    EventType,
    HandoffOutcome,
)
from poppy_django.service import conversations, desk_log, guards
from poppy_django.service.assignment import assigned_moment
from poppy_django.service.snapshot import last_event_id
from poppy_django.staff import csat, handoffs
from poppy_django.store import event_log, lifecycle

#: The most events a ``conversation_changed`` refusal lists (the newest are re-read anyway).
ARRIVED_SHOWN = 20


def _join_locked(
    conversation: Conversation, by: str, meta: dict[str, Any], *, previous: str = ""
) -> None:
    """``by`` holds the locked conversation from now on; the agent stays out until they leave."""
    from_queue = lifecycle.QUEUED(conversation)
    lifecycle.person_joins(conversation, holder=by, meta=meta)
    handoffs.joined(conversation, by)
    if previous:
        desk_log.record(conversation, DeskEventKind.TOOK_OVER, by=by, other=previous, meta=meta)
        assigned_moment(conversation, previous=previous, by=by, how="took_over")
    observe.moment(
        "human_joined",
        signals.human_joined,
        conversation_id=conversation.id,
        by=by,
        from_queue=from_queue,
    )


@transaction.atomic
def human_joined(
    conversation_id: str,
    *,
    by: str,
    take_over: bool = False,
    request_id: str | None = None,
) -> None:
    """``by`` takes the conversation: idle/human; the agent stays out until they leave.

    Refused (``held_by_other``, naming them) when another staff member has it, unless
    ``take_over``: then it is taken from them, recorded on the desk and shown to them live.
    Joining a conversation one already holds changes nothing.
    """
    guards.person(by)
    conversation = guards.lock_open(conversation_id)
    if lifecycle.holds(conversation, by):
        return
    current = lifecycle.holder(conversation)
    if current and current != by and not take_over:
        guards.refuse_if_held_by_other(conversation, by)
    previous = current if current != by else ""
    _join_locked(conversation, by, guards.meta(request_id, by), previous=previous)


def take_over(conversation_id: str, *, by: str, request_id: str | None = None) -> None:
    """:func:`human_joined` with ``take_over=True``: ``by`` takes it from whoever has it."""
    human_joined(conversation_id, by=by, take_over=True, request_id=request_id)


def _check_seen(conversation: Conversation, seen: str, by: str) -> None:
    """Refuse a reply written over events the staffer had not read (compare-and-set).

    Their own joining is no news to them: a ``state`` change ``by`` made after ``seen`` (the
    join they pressed before writing, its event not yet on their page) does not refuse it.
    """
    if seen == "" and conversation.last_seq == 0:
        return  # nothing written yet, so nothing unread
    seq = ids.parse_cursor(conversation.id, seen) if isinstance(seen, str) else None
    if seq is None or seq > conversation.last_seq:
        raise PoppyError(
            "invalid_request", "seen: the id of the last event you read in this conversation."
        )
    if seq == conversation.last_seq:
        return
    news = (
        Event.objects.filter(conversation=conversation, seq__gt=seq)
        .exclude(type=EventType.STATE, meta__by=by)
        .order_by("seq")
    )
    arrived = list(news[:ARRIVED_SHOWN])
    if not arrived:
        return
    count = news.count() if len(arrived) == ARRIVED_SHOWN else len(arrived)
    raise PoppyError(
        "conversation_changed",
        f"{count} new event{'s' if count != 1 else ''} since you read it: read them first.",
        extra={
            "seen": seen,
            "last_event_id": last_event_id(conversation),
            "arrived": [event.to_wire() for event in arrived],
        },
    )


@transaction.atomic
def post_message(
    conversation_id: str,
    text: str,
    *,
    by: str,
    seen: str,
    data: dict[str, Any] | None = None,
    request_id: str | None = None,
) -> Event:
    """A message written by ``by`` (``sender: "human"``), over ``seen``, the last event
    they read.

    Refused, with nothing written, when another staff member has the conversation
    (``held_by_other``), when a Direct Conversation is open under it (the User talks there:
    ``direct_conversation_open``), or when anything was written after ``seen``
    (``conversation_changed``, with the events that ``arrived``). When no one has it, ``by``
    joins it first, in the same transaction.
    """
    if not isinstance(text, str) or not text.strip():
        raise PoppyError("invalid_request", "A message needs text.")
    guards.person(by)
    conversation = guards.lock_open(conversation_id)
    guards.refuse_if_held_by_other(conversation, by)
    direct = conversations.open_direct(conversation)
    if direct is not None:
        raise PoppyError(
            "direct_conversation_open",
            "The User is in a Direct Conversation opened from this one: answer there.",
            extra={"direct_conversation_id": direct.id},
        )
    _check_seen(conversation, seen, by)
    meta = guards.meta(request_id, by)
    if not lifecycle.holds(conversation, by):
        _join_locked(conversation, by, meta)
    handoffs.responded(conversation, by)
    return event_log.append_company_message(
        conversation,
        message_id=ids.new_company_message_id(),
        text=text,
        sender="human",
        data=data,
        meta=meta,
    )


@transaction.atomic
def human_left(conversation_id: str, *, by: str, request_id: str | None = None) -> None:
    """Back to the agent; messages it has not answered yet start a turn.

    Refused (``held_by_other``) when another staff member has the conversation.
    """
    guards.person(by)
    conversation = guards.lock_open(conversation_id)
    guards.refuse_if_held_by_other(conversation, by)
    handled = lifecycle.PERSON_HOLDS(conversation)
    record = handoffs.ended(conversation) if handled else None
    if not handled:  # a waiting handoff given back by the staff member it waited for
        handoffs.not_taken(conversation, HandoffOutcome.UNAVAILABLE, "given back", by=by)
    meta = guards.meta(request_id, by)
    if lifecycle.person_leaves(conversation, meta):
        dispatch.dispatch_on_commit(conversation.id)
    elif handled:  # how was the help? (asked only when nothing waits for the agent's answer)
        team = record.team if record is not None else ""
        csat.ask(conversation, staff=by, team=team, meta=meta)
    observe.moment("human_left", signals.human_left, conversation_id=conversation.id, by=by)
