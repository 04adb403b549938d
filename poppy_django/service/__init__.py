"""The company's side: the Python API the support desk (or your own code) calls on a
conversation. The personal agent's side, behind the endpoint, is
:mod:`poppy_django.service.conversations`.

Every function that changes a conversation works in one transaction under the
conversation's row lock, and accepts ``request_id`` (echoed on the events it causes, for the
desk's correlation; never shown to personal agents) and ``by`` (the staff member's username).
A refusal is a :class:`~poppy_django.errors.PoppyError` with a code of the one error table,
raised before anything is written.

**One owner.** A conversation handed to people is with at most one staff member, its
``assignee``: the holder once they joined, the teammate it is assigned to while it waits.
Joining one another staff member has is refused (``held_by_other``, naming them) unless it
is an explicit take-over (``take_over=True``: recorded for the desk, shown live to the one
it was taken from). A person's message needs the conversation: when no one has it, sending
joins it first, in the same transaction (the reply and the taking are one decision, so no
colleague can join between them, and a refused reply leaves nothing behind, not even a
join). It carries ``seen``, the id of the last event the staffer read: when anything was
written after it, the reply is refused (``conversation_changed``, with what ``arrived``) and
nothing is written. While a person holds the conversation the Company Agent writes nothing
(a turn in flight when they join ends without its reply).

>>> from poppy_django import service
>>> seen = service.get(conversation_id).last_event_id
>>> service.post_message(conversation_id, "Hi, I am Sam.", by="sam", seen=seen)
>>> service.human_left(conversation_id, by="sam")
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet

from poppy_django import fanout, handoff, ids, observe, signals
from poppy_django.engine import dispatch, transitions
from poppy_django.errors import PoppyError
from poppy_django.models import (
    CannedReply,
    Conversation,
    DeskEvent,
    DeskEventKind,
    Event,
    EventType,
    Responder,
    Status,
)
from poppy_django.service import conversations
from poppy_django.staff import canned, office_hours, presence
from poppy_django.staff.canned import RenderedReply
from poppy_django.staff.presence import StaffStatus
from poppy_django.store import event_log

#: The most events a ``conversation_changed`` refusal lists (the newest are re-read anyway).
ARRIVED_SHOWN = 20
#: The longest private note.
MAX_NOTE = 10_000


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


def _person(by: str) -> str:
    if not isinstance(by, str) or not by.strip():
        raise PoppyError("invalid_request", "by: the staff member's username is required.")
    return by


def holder(conversation: Conversation) -> str:
    """Whom the conversation is with now ("" for no one): its holder, or its assignee while
    it waits for a person. Closed and agent-handled conversations are with no one."""
    handed = conversation.responder == Responder.HUMAN or conversation.status == Status.QUEUED
    return conversation.assignee if handed and conversation.status != Status.CLOSED else ""


def _refuse_if_held_by_other(conversation: Conversation, by: str) -> None:
    current = holder(conversation)
    if current and current != by:
        raise PoppyError(
            "held_by_other",
            f"{current} has this conversation.",
            extra={"holder": current},
        )


def _holds(conversation: Conversation, by: str) -> bool:
    return conversation.responder == Responder.HUMAN and conversation.assignee == by


def _last_event_id(conversation: Conversation) -> str:
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
        last_event_id=_last_event_id(conversation),
        handoff_requested_at=conversation.handoff_requested_at,
        handoff_initiator=conversation.handoff_initiator,
        handoff_reason=conversation.handoff_reason,
    )


# One owner: join, take over, reply, leave ---------------------------------------------------


def _join_locked(
    conversation: Conversation, by: str, meta: dict[str, Any], *, previous: str = ""
) -> None:
    """``by`` holds the locked conversation from now on; the agent stays out until they leave."""
    conversation.assignee = by
    conversation.handoff_requested_at = None
    conversation.save(update_fields=["assignee", "handoff_requested_at", "updated_at"])
    event_log.set_state(conversation, status=Status.IDLE, responder=Responder.HUMAN, meta=meta)
    if previous:
        _desk_event(conversation, DeskEventKind.TOOK_OVER, by=by, other=previous, meta=meta)
        _assigned_moment(conversation, previous=previous, by=by, how="took_over")
    observe.moment("human_joined", signals.human_joined, conversation_id=conversation.id, by=by)


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
    _person(by)
    conversation = _open(conversation_id)
    if _holds(conversation, by):
        return
    current = holder(conversation)
    if current and current != by and not take_over:
        _refuse_if_held_by_other(conversation, by)
    previous = current if current != by else ""
    _join_locked(conversation, by, _meta(request_id, by), previous=previous)


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
            "last_event_id": _last_event_id(conversation),
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
    _person(by)
    conversation = _open(conversation_id)
    _refuse_if_held_by_other(conversation, by)
    direct = conversations.open_direct(conversation)
    if direct is not None:
        raise PoppyError(
            "direct_conversation_open",
            "The User is in a Direct Conversation opened from this one: answer there.",
            extra={"direct_conversation_id": direct.id},
        )
    _check_seen(conversation, seen, by)
    meta = _meta(request_id, by)
    if not _holds(conversation, by):
        _join_locked(conversation, by, meta)
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
    _person(by)
    conversation = _open(conversation_id)
    _refuse_if_held_by_other(conversation, by)
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
    conversation_id: str, reason: str, *, by: str, request_id: str | None = None
) -> None:
    """No one can take the queued handoff: say why; the agent keeps the conversation.

    Refused when it is not waiting for a person (``not_waiting``), or is assigned to another
    staff member (``held_by_other``).
    """
    _person(by)
    conversation = _open(conversation_id)
    if conversation.status != Status.QUEUED:
        raise PoppyError("not_waiting", "No handoff is waiting for a person.")
    _refuse_if_held_by_other(conversation, by)
    handoff.unavailable(conversation, reason, meta=_meta(request_id, by))


@transaction.atomic
def hand_off(conversation_id: str, *, reason: str = "", request_id: str | None = None) -> str:
    """The Company Agent hands off on its own initiative (through the request hook);
    ``reason`` is shown to staff. Returns the outcome ("queued", "unavailable"...)."""
    conversation = _open(conversation_id)
    return handoff.request(
        conversation, initiator="company_agent", reason=reason, meta=_meta(request_id, "")
    )


@transaction.atomic
def request_user(
    conversation_id: str, reason: str, *, by: str, request_id: str | None = None
) -> Event:
    """Ask the personal agent to bring the User (it may open a Direct Conversation).

    Refused (``held_by_other``) when another staff member has the conversation.
    """
    _person(by)
    conversation = _open(conversation_id)
    _refuse_if_held_by_other(conversation, by)
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
def close(conversation_id: str, *, by: str, request_id: str | None = None) -> None:
    """Close from the company side (its open Direct Conversation first).

    Refused (``held_by_other``) when another staff member has the conversation.
    """
    _person(by)
    conversations.lock_parent_first(conversation_id)
    conversation = event_log.lock(conversation_id)
    _refuse_if_held_by_other(conversation, by)
    conversations.close_locked(conversation, by=by, meta=_meta(request_id, by))


# Sharing the work: assign, transfer, and the desk's views -----------------------------------


def _assigned_moment(conversation: Conversation, *, previous: str, by: str, how: str) -> None:
    observe.moment(
        "conversation_assigned",
        signals.conversation_assigned,
        conversation_id=conversation.id,
        assignee=conversation.assignee,
        previous=previous,
        by=by,
        how=how,
    )


@transaction.atomic
def assign(
    conversation_id: str,
    to: str,
    *,
    by: str,
    note: str = "",
    request_id: str | None = None,
) -> None:
    """Give a handoff waiting for a person to the teammate ``to`` (with an optional note):
    they see it as theirs, and only they join it (others take it over).

    Refused when ``to`` is not on the desk (``unknown_staff``), and when the conversation is
    not waiting for a person (``not_waiting``: its holder transfers one they have).
    """
    _person(by)
    presence.staff_member(to)
    conversation = _open(conversation_id)
    if conversation.status != Status.QUEUED:
        raise PoppyError(
            "not_waiting",
            "Only a conversation waiting for a person is assigned; its holder transfers it.",
        )
    previous = conversation.assignee
    if previous == to and not note:
        return
    conversation.assignee = to
    conversation.save(update_fields=["assignee", "updated_at"])
    meta = _meta(request_id, by)
    _desk_event(conversation, DeskEventKind.ASSIGNED, by=by, other=to, text=note, meta=meta)
    _assigned_moment(conversation, previous=previous, by=by, how="assigned")


@transaction.atomic
def unassign(conversation_id: str, *, by: str, request_id: str | None = None) -> None:
    """A waiting handoff back to no one in particular: whoever joins first takes it."""
    _person(by)
    conversation = _open(conversation_id)
    if conversation.status != Status.QUEUED:
        raise PoppyError("not_waiting", "No handoff is waiting for a person.")
    previous = conversation.assignee
    if not previous:
        return
    conversation.assignee = ""
    conversation.save(update_fields=["assignee", "updated_at"])
    meta = _meta(request_id, by)
    _desk_event(conversation, DeskEventKind.UNASSIGNED, by=by, other=previous, meta=meta)
    _assigned_moment(conversation, previous=previous, by=by, how="assigned")


@transaction.atomic
def transfer(
    conversation_id: str,
    to: str,
    *,
    by: str,
    note: str = "",
    request_id: str | None = None,
) -> None:
    """``by``, who holds the conversation, gives it to the teammate ``to`` with a note: ``to``
    holds it from now on (the personal agent sees no change: a person still has it).

    Refused when ``to`` is not on the desk (``unknown_staff``) or is ``by``
    (``invalid_request``), when another staff member holds it (``held_by_other``), and when
    ``by`` does not hold it (``not_holder``).
    """
    _person(by)
    presence.staff_member(to)
    if to == by:
        raise PoppyError("invalid_request", "Transfer to someone else.")
    conversation = _open(conversation_id)
    _refuse_if_held_by_other(conversation, by)
    if not _holds(conversation, by):
        raise PoppyError("not_holder", "Join the conversation before transferring it.")
    conversation.assignee = to
    conversation.save(update_fields=["assignee", "updated_at"])
    meta = _meta(request_id, by)
    _desk_event(conversation, DeskEventKind.TRANSFERRED, by=by, other=to, text=note, meta=meta)
    _assigned_moment(conversation, previous=by, by=by, how="transferred")


def mine(username: str) -> QuerySet[Conversation]:
    """Open conversations with ``username``: held, or assigned to them and waiting."""
    return Conversation.objects.filter(handed_to_people(), assignee=username).exclude(
        status=Status.CLOSED
    )


def unassigned() -> QuerySet[Conversation]:
    """Handoffs waiting for a person that no one in particular has."""
    return Conversation.objects.filter(status=Status.QUEUED, assignee="")


def waiting() -> QuerySet[Conversation]:
    """Handoffs waiting for a person, the longest waiting first."""
    return Conversation.objects.filter(status=Status.QUEUED).order_by("handoff_requested_at", "pk")


def handed_to_people() -> Q:
    """Conversations with people or waiting for them (the states with an owner)."""
    return Q(responder=Responder.HUMAN) | Q(status=Status.QUEUED)


# Private notes and the desk's own log -------------------------------------------------------


def _desk_event(
    conversation: Conversation,
    kind: str,
    *,
    by: str,
    other: str = "",
    text: str = "",
    meta: dict[str, Any],
) -> DeskEvent:
    """Record a staff-only event of the locked conversation and tell the desk's browsers."""
    entry = DeskEvent.objects.create(
        conversation=conversation,
        kind=kind,
        by=by,
        other=other,
        text=text,
        after_seq=conversation.last_seq,
        request_id=meta.get("request_id", ""),
    )
    fanout.desk_news_on_commit(
        conversation.id,
        {
            "desk_event": entry.pk,
            "kind": kind,
            "by": by,
            "other": other,
            "assignee": conversation.assignee,
            "request_id": entry.request_id or None,
        },
    )
    return entry


@transaction.atomic
def add_note(
    conversation_id: str, text: str, *, by: str, request_id: str | None = None
) -> DeskEvent:
    """A private note between staff: on the desk only, never on the wire (not an event of
    the conversation's log, so no read, stream, MCP answer or export can carry it)."""
    _person(by)
    if not isinstance(text, str) or not text.strip():
        raise PoppyError("invalid_request", "A note needs text.")
    if len(text) > MAX_NOTE:
        raise PoppyError("invalid_request", f"A note is at most {MAX_NOTE} characters.")
    conversation = event_log.lock(conversation_id)
    return _desk_event(
        conversation, DeskEventKind.NOTE, by=by, text=text.strip(), meta=_meta(request_id, by)
    )


def desk_events(conversation_id: str, *, after: int = 0) -> list[DeskEvent]:
    """The conversation's notes, take-overs and assignments after the desk event ``after``
    (its ``pk``), oldest first: each sits after the log's event ``after_seq``."""
    return list(
        DeskEvent.objects.filter(conversation_id=conversation_id, pk__gt=after).order_by("pk")
    )


# Presence and office hours ------------------------------------------------------------------


def staff_seen(username: str) -> None:
    """A desk page of ``username``'s is open (called as it loads and while it stays open)."""
    presence.seen(username)


def set_away(username: str, away: bool) -> StaffStatus:
    """``username`` takes no new handoffs (``away=True``) or takes them again."""
    return presence.set_away(username, away)


def staff_status(username: str) -> StaffStatus:
    return presence.status(username)


def available_staff() -> list[str]:
    """The usernames of the staff who take handoffs now."""
    return presence.available()


def team() -> list[StaffStatus]:
    """Everyone who has used the desk, with their presence."""
    return presence.everyone()


def office_open() -> bool:
    """Whether it is office hours now (always, without ``POPPY["OFFICE_HOURS"]``)."""
    return office_hours.open_now()


# Canned replies ----------------------------------------------------------------------------


def canned_replies(conversation_id: str) -> list[RenderedReply]:
    """Every canned reply, its placeholders filled for this conversation."""
    return canned.rendered(_existing(conversation_id))


def canned_reply(conversation_id: str, shortcut: str) -> RenderedReply:
    """One canned reply by its shortcut, filled for this conversation (``not_found``)."""
    reply = CannedReply.objects.filter(shortcut=shortcut).first()
    if reply is None:
        raise PoppyError("not_found", f"No canned reply /{shortcut}.")
    return canned.render(_existing(conversation_id), reply)


def _existing(conversation_id: str) -> Conversation:
    try:
        return Conversation.objects.get(pk=conversation_id)
    except Conversation.DoesNotExist as exc:
        raise PoppyError("conversation_not_found") from exc
