"""The conversation's lifecycle, in one place: its states, the rules of who may speak, the
messages waiting for an answer, its leases, and the named transitions between states.

A conversation is ``working`` (the Company Agent has messages to answer), ``idle``,
``queued`` (waiting for a person) or ``closed``; its ``responder`` is the agent, or a person
(``human``) who holds it, its ``assignee``. Its leases say which worker writes it now
(``lease_owner`` until ``lease_expires_at``) and which turn runs in its agent thread
(``thread_owner`` until ``thread_expires_at``, on the thread root).

Every transition is applied to the conversation row the caller's transaction locked, and
writes it once, with its ``state`` event: one statement on PostgreSQL, or part of the
caller's :func:`~poppy_django.store.event_log.one_write` block. No other module writes
``status``, ``responder`` or the lease fields (``tests/ops/test_lifecycle_writes.py`` reads
the package for a write elsewhere). Callers keep their side effects (dispatching a turn, the
hand-off hooks, the moments): they happen around a transition, never inside one.

>>> conversation = event_log.lock(conversation_id)
>>> if lifecycle.person_leaves(conversation, meta={"by": "sam"}):
...     dispatch.dispatch_on_commit(conversation.id)
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.db import connections, models, router, transaction
from django.db.models import Q
from django.utils import timezone

from poppy_django.conf import poppy_settings
from poppy_django.models import (
    ActionRecord,
    ActionStatus,
    Conversation,
    Event,
    EventType,
    Responder,
    Status,
)
from poppy_django.store import backends, event_log, wire

# -- who may speak: each rule once, asked of a row or of the table -----------------------------


class Rule:
    """A rule on a conversation's state, asked of a row (``rule(conversation)``) or of the
    table (``rule.q``) from one definition, so the desk's lists, the service's refusals and
    the engine's checks cannot drift apart. Rules combine with ``&``, ``|`` and ``~``."""

    def __call__(self, conversation: Conversation) -> bool:
        return self.holds(conversation.status, conversation.responder)

    def holds(self, status: str, responder: str) -> bool:
        raise NotImplementedError

    @property
    def q(self) -> Q:
        raise NotImplementedError

    def __and__(self, other: Rule) -> Rule:
        return _Joined(self, other, both=True)

    def __or__(self, other: Rule) -> Rule:
        return _Joined(self, other, both=False)

    def __invert__(self) -> Rule:
        return _Not(self)


@dataclass(frozen=True)
class _Is(Rule):
    field: str
    value: str

    def holds(self, status: str, responder: str) -> bool:
        return (status if self.field == "status" else responder) == self.value

    @property
    def q(self) -> Q:
        return Q(**{self.field: self.value})


@dataclass(frozen=True)
class _Joined(Rule):
    """Two rules that must both hold (``&``), or either (``|``)."""

    first: Rule
    second: Rule
    both: bool

    def holds(self, status: str, responder: str) -> bool:
        first, second = self.first.holds(status, responder), self.second.holds(status, responder)
        return (first and second) if self.both else (first or second)

    @property
    def q(self) -> Q:
        return self.first.q & self.second.q if self.both else self.first.q | self.second.q


@dataclass(frozen=True)
class _Not(Rule):
    rule: Rule

    def holds(self, status: str, responder: str) -> bool:
        return not self.rule.holds(status, responder)

    @property
    def q(self) -> Q:
        return ~self.rule.q


WORKING = _Is("status", Status.WORKING)
IDLE = _Is("status", Status.IDLE)
#: Waiting for a person.
QUEUED = _Is("status", Status.QUEUED)
CLOSED = _Is("status", Status.CLOSED)
OPEN = ~CLOSED
#: A person holds the conversation: the Company Agent does not speak in it.
PERSON_HOLDS = _Is("responder", Responder.HUMAN)
AGENT_RESPONDS = _Is("responder", Responder.AGENT)
#: A person has the conversation, or is being found: the agent stays out of it (the endpoint
#: routes messages by it; a second handoff is ``already``).
WITH_PEOPLE = QUEUED | PERSON_HOLDS
#: With people and open: the conversations a staff member can be holding or assigned.
HANDED_TO_PEOPLE = WITH_PEOPLE & OPEN
#: The Company Agent has messages to answer.
AGENT_ANSWERS = WORKING & AGENT_RESPONDS
#: A turn's outcome is written: not into a closed conversation, never while a person holds
#: it (one who joined while the turn ran answers the messages themselves).
AGENT_MAY_WRITE = OPEN & ~PERSON_HOLDS


def holder(conversation: Conversation) -> str:
    """Whom the conversation is with now ("" for no one): its holder, or its assignee while
    it waits for a person. Closed and agent-handled conversations are with no one."""
    return conversation.assignee if HANDED_TO_PEOPLE(conversation) else ""


def holds(conversation: Conversation, by: str) -> bool:
    """Whether the staff member ``by`` holds the conversation (joined it)."""
    return PERSON_HOLDS(conversation) and conversation.assignee == by


# -- the messages waiting for an answer ---------------------------------------------------------


def pending_messages(conversation: Conversation, upto_seq: int | None = None) -> list[Event]:
    """The user messages after ``answered_seq`` (up to ``upto_seq``) that start a turn.

    Without ``upto_seq``, call it with the conversation locked (as every caller does): no
    message is appended meanwhile, so ``last_seq`` bounds them.
    """
    upto = conversation.last_seq if upto_seq is None else upto_seq
    backend = backends.for_writing(Event)
    events = backend.fetch(
        Event,
        backend.sql.messages_in_range(),
        [conversation.id, conversation.answered_seq, upto, EventType.MESSAGE, "user"],
    )
    return [event for event in events if wire.starts_turn(event.payload["message"])]


def _pending_and_approved(conversation: Conversation) -> tuple[list[Event], bool]:
    """What a claim reads after its lock: the messages it would answer (as
    :func:`_claim_locked` asks :func:`pending_messages` for them) and whether staff approved
    actions to run first, in one statement on PostgreSQL."""
    upto = conversation.turn_upto_seq if _retry(conversation) else conversation.last_seq
    events, approved = backends.for_writing(Event).messages_and_approved(
        conversation.id, conversation.answered_seq, upto, "user", ActionStatus.APPROVED
    )
    return [event for event in events if wire.starts_turn(event.payload["message"])], approved


def _retry(conversation: Conversation) -> bool:
    """The last claimed turn was not answered: a claim takes the same messages again."""
    return conversation.turn_upto_seq > conversation.answered_seq


def approved_action_ids(conversation_id: str) -> list[int]:
    """The conversation's actions staff approved and no worker ran yet, oldest first: a
    conversation with one needs a writer as a ``working`` one does."""
    return backends.for_writing(ActionRecord).action_ids(conversation_id, ActionStatus.APPROVED)


# -- transitions of the people and the agent ------------------------------------------------


def _write(
    conversation: Conversation,
    meta: dict[str, Any] | None = None,
    *,
    status: str | None = None,
    responder: str | None = None,
    **fields: Any,
) -> None:
    """Set ``fields`` and the state on the locked row and write them in one write, with a
    ``state`` event when the state actually changes."""
    with event_log.one_statement(conversation):
        for name, value in fields.items():
            setattr(conversation, name, value)
        event_log.save(conversation, *fields)
        new_status = status or conversation.status
        new_responder = responder or conversation.responder
        if new_status == conversation.status and new_responder == conversation.responder:
            return
        conversation.status = new_status
        conversation.responder = new_responder
        event_log.save(conversation, "status", "responder")
        event_log.append(
            conversation,
            EventType.STATE,
            {"status": str(new_status), "responder": str(new_responder)},
            meta=meta,
        )


def agent_works(conversation: Conversation) -> bool:
    """A user message that starts a turn arrived and the agent has the conversation: it is
    working. True when the caller must dispatch its turn; False when a live writer holds the
    lease: that writer releases it only in a write that finds no message left to answer,
    under this row's lock, so it answers this one in its next turn (a dispatch would find
    the lease taken and end; a writer that died lets its lease expire, and the recovery
    sweep takes the conversation up, as it would after that dispatch)."""
    _write(conversation, status=Status.WORKING)
    until = conversation.lease_expires_at
    if conversation.lease_owner is None or until is None:
        return True
    return until <= timezone.now()


def answered_without_turn(conversation: Conversation, seq: int) -> None:
    """The messages up to ``seq`` need no turn: a person has them (or is being found), or
    the message was answered otherwise (a satisfaction survey's answer, thanked)."""
    _write(conversation, answered_seq=seq)


def queue_for_person(
    conversation: Conversation, *, assignee: str, meta: dict[str, Any] | None = None
) -> None:
    """A handoff waits for a person (``assignee``: the teammate it is given to, "" for no one
    in particular); the desk serves the oldest first."""
    _write(
        conversation,
        meta,
        status=Status.QUEUED,
        responder=Responder.AGENT,
        handoff_requested_at=timezone.now(),
        assignee=assignee,
    )


def person_joins(
    conversation: Conversation, *, holder: str | None, meta: dict[str, Any] | None = None
) -> None:
    """A person holds the conversation (``holder``, the staff member; None when the hand-off
    hook says someone joined outside the desk): the agent stays out until they leave."""
    fields = {} if holder is None else {"assignee": holder, "handoff_requested_at": None}
    _write(conversation, meta, status=Status.IDLE, responder=Responder.HUMAN, **fields)


def person_leaves(conversation: Conversation, meta: dict[str, Any] | None = None) -> bool:
    """Back to the agent; whether messages it has not answered wait (it is then working:
    the caller dispatches the turn)."""
    unanswered = bool(pending_messages(conversation))
    _back_to_agent(conversation, meta, unanswered=unanswered)
    return unanswered


def handoff_declined(conversation: Conversation, meta: dict[str, Any] | None = None) -> bool:
    """No one takes the queued handoff: back to the agent, which answers what the personal
    agent said while it waited (those messages went to the message hook, for a person who
    never came); whether any wait (it is then working: the caller dispatches the turn)."""
    unanswered, rewound_to = _said_while_waiting(conversation)
    fields = {} if rewound_to is None else {"answered_seq": rewound_to}
    _back_to_agent(conversation, meta, unanswered=unanswered, **fields)
    return unanswered


def _back_to_agent(
    conversation: Conversation, meta: dict[str, Any] | None, *, unanswered: bool, **fields: Any
) -> None:
    _write(
        conversation,
        meta,
        status=Status.WORKING if unanswered else Status.IDLE,
        responder=Responder.AGENT,
        handoff_requested_at=None,
        assignee="",
        **fields,
    )


def _said_while_waiting(conversation: Conversation) -> tuple[bool, int | None]:
    """Whether user messages that start a turn wait for the agent after a queued handoff,
    and where ``answered_seq`` goes back to (None: it stays) so that those that arrived
    since the handoff was queued are unanswered again. Never below the last turn's messages,
    which a claim would take for a retry."""
    queued = (
        Event.objects.filter(
            conversation=conversation, type=EventType.STATE, payload__status=Status.QUEUED
        )
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    if queued is None:
        return False, None
    since = max(queued, conversation.turn_upto_seq)
    if conversation.answered_seq <= since:
        return bool(pending_messages(conversation)), None
    answered = conversation.answered_seq
    conversation.answered_seq = since
    try:
        return (True, since) if pending_messages(conversation) else (False, None)
    finally:
        conversation.answered_seq = answered


def close(conversation: Conversation, meta: dict[str, Any] | None = None) -> None:
    """The conversation is closed (for good: nothing is written into it afterwards)."""
    _write(conversation, meta, status=Status.CLOSED, closed_at=timezone.now())


def give_to(conversation: Conversation, assignee: str, *, team: str | None = None) -> None:
    """The handoff waiting (or the conversation held) is ``assignee``'s now ("" for no one
    in particular), and ``team``'s if given: no state changes, so no ``state`` event."""
    if team is None:
        _write(conversation, assignee=assignee)
    else:
        _write(conversation, assignee=assignee, team=team)


def handoff_asked(conversation: Conversation, *, initiator: str, reason: str) -> None:
    """Who asked for a person ("personal_agent" | "company_agent") and the Company Agent's
    reason: written before the request hook is asked, so the hook reads them."""
    _write(conversation, handoff_initiator=initiator, handoff_reason=reason)


# -- leases ---------------------------------------------------------------------------------


class LeaseLost(Exception):
    """Another worker took the conversation over: stop without writing."""


def lease_until() -> datetime:
    return timezone.now() + timedelta(seconds=poppy_settings.LEASE_SECONDS)


def take_lease(conversation_id: str, owner: str) -> bool:
    """Claim the conversation if no one holds it or the holder's claim expired."""
    return _take(conversation_id, owner, "lease_owner", "lease_expires_at")


def take_lease_locked(conversation_id: str, owner: str) -> Conversation | None:
    """In a transaction: :func:`take_lease`, and the conversation row-locked until the
    transaction ends when it was taken (None: another worker holds it). On PostgreSQL one
    statement: the lease's ``UPDATE`` returns the row it locked."""
    parameters = _take_parameters(conversation_id, owner, "lease_expires_at")
    return backends.for_writing(Conversation).take_and_lock(conversation_id, parameters)


def lock_owned(conversation_id: str, owner: str) -> Conversation:
    """The conversation row-locked, only while ``owner`` still holds its lease."""
    conversation = event_log.lock(conversation_id)
    if conversation.lease_owner != owner:
        raise LeaseLost(conversation_id)
    return conversation


def take_thread(root_id: str, owner: str) -> bool:
    """Claim the agent thread rooted at ``root_id`` if no live turn runs in it."""
    return _take(root_id, owner, "thread_owner", "thread_expires_at")


def free_thread(root_id: str, owner: str) -> None:
    """Free the agent thread rooted at ``root_id`` if ``owner`` holds it."""
    Conversation.objects.filter(pk=root_id, thread_owner=owner).update(
        thread_owner=None, thread_expires_at=None
    )


def renew_leases(owners: list[str]) -> set[str]:
    """Renew, in one statement, every conversation lease and agent thread these owners hold;
    the owners whose conversation lease was renewed (the others lost theirs)."""
    return backends.for_writing(Conversation).renew(owners, lease_until())


def _take(pk: str, owner: str, owner_field: str, until_field: str) -> bool:
    """One conditional UPDATE: ``owner`` holds the row's lease (or thread) until
    :func:`lease_until` unless another owner holds it unexpired."""
    return backends.for_writing(Conversation).take(
        owner_field, until_field, _take_parameters(pk, owner, until_field)
    )


def _take_parameters(pk: str, owner: str, until_field: str) -> list[Any]:
    """:meth:`~poppy_django.store.statements.Statements.lease_taken`'s parameters: the owner,
    until when, the id, now, the owner again."""
    database = connections[router.db_for_write(Conversation)]
    until = cast(models.DateTimeField, Conversation._meta.get_field(until_field))
    return [
        owner,
        until.get_db_prep_value(lease_until(), database),
        pk,
        until.get_db_prep_value(timezone.now(), database),
        owner,
    ]


def _take_own_thread(conversation: Conversation, owner: str) -> bool:
    """Claim the agent thread of a locked conversation that is its own thread root, in the
    row's next write, if no live turn runs in it (what :func:`take_thread` does, without
    a statement of its own)."""
    if conversation.thread_root_id != conversation.id:
        return False  # a Direct: its thread lives on its parent's row
    free = (
        conversation.thread_owner is None
        or conversation.thread_owner == owner
        or (
            conversation.thread_expires_at is not None
            and conversation.thread_expires_at < timezone.now()
        )
    )
    if free:
        _write(conversation, thread_owner=owner, thread_expires_at=lease_until())
    return free


def _give_back_own_thread(conversation: Conversation, owner: str) -> bool:
    """Free the agent thread of a locked conversation that is its own thread root, in the
    row's next write, if ``owner`` holds it."""
    if conversation.thread_root_id != conversation.id or conversation.thread_owner != owner:
        return False
    _write(conversation, thread_owner=None, thread_expires_at=None)
    return True


def orphans() -> Q:
    """Conversations that need a writer and have none: ``working``, or with an action staff
    approved, and their lease expired (the worker died) or never taken for
    ``LEASE_SECONDS`` (the dispatch was lost)."""
    now = timezone.now()
    grace = now - timedelta(seconds=poppy_settings.LEASE_SECONDS)
    approved = ActionRecord.objects.filter(status=ActionStatus.APPROVED).values("conversation_id")
    needs_writer = WORKING.q | Q(pk__in=approved)
    writer_gone = Q(lease_expires_at__lt=now) | Q(lease_owner__isnull=True, updated_at__lt=grace)
    return needs_writer & writer_gone


def take_orphan(owner: str) -> str | None:
    """Take the lease of one orphaned conversation no other sweeper is taking; its id."""
    with transaction.atomic():
        conversation_id = (
            Conversation.objects.select_for_update(skip_locked=True)
            .filter(orphans())
            .order_by("updated_at")
            .values_list("pk", flat=True)
            .first()
        )
        if conversation_id is None:
            return None
        Conversation.objects.filter(pk=conversation_id).update(
            lease_owner=owner, lease_expires_at=lease_until()
        )
        return conversation_id


# -- a turn's steps -------------------------------------------------------------------------


class NoTurn(enum.Enum):
    """Why a claim found no turn to run."""

    #: Nothing left to answer: the conversation is idle and the lease released.
    DONE = "done"
    #: No message to answer, but staff approved an action meanwhile: run it first.
    APPROVALS = "approvals"


@dataclass(frozen=True)
class TurnClaim:
    """The turn a claim fixed (and persisted) before anything can fail: a retry after a
    crash answers exactly the same messages, with the same message id and action keys."""

    conversation: Conversation
    #: The newest message answered before this turn, and the last message it answers.
    answered_seq: int
    upto_seq: int
    #: How many times this turn was started (past ``TURN_MAX_ATTEMPTS`` it is failed).
    attempt: int
    #: Every turn-starting message up to this seq is answered by this turn: a later one is
    #: looked for at commit only if the log grew past it.
    seen_seq: int
    #: Its messages, read under the claim's lock, when the claim took the agent thread too
    #: (None: the turn waits for the thread, then reads them).
    pending: list[Event] | None


def begin(conversation_id: str, owner: str) -> TurnClaim | NoTurn | None:
    """Take the lease (None: another worker holds it) and, unless staff approved actions to
    run first (:attr:`NoTurn.APPROVALS`), claim the next turn: one transaction."""
    with transaction.atomic():
        conversation = take_lease_locked(conversation_id, owner)
        if conversation is None:
            return None
        if not AGENT_ANSWERS(conversation):  # no message to read: the approvals alone
            if approved_action_ids(conversation_id):
                return NoTurn.APPROVALS
            return _claim_locked(conversation, owner, approved=False)
        pending, approved = _pending_and_approved(conversation)
        if approved:
            return NoTurn.APPROVALS
        return _claim_locked(conversation, owner, approved=False, pending=pending)


def claim(conversation_id: str, owner: str) -> TurnClaim | NoTurn:
    """The next turn to run (its attempt counted), or why there is none; ``owner`` holds
    the lease."""
    with transaction.atomic():
        return _claim_locked(lock_owned(conversation_id, owner), owner)


def _claim_locked(
    conversation: Conversation,
    owner: str,
    approved: bool | None = None,
    pending: list[Event] | None = None,
) -> TurnClaim | NoTurn:
    """:func:`claim` on a conversation locked under ``owner``'s lease; ``approved``: whether
    staff approved actions to run, when already read since the lock (None: read it here if
    it matters); ``pending``: the messages to answer, when already read with it
    (:func:`_pending_and_approved`). It takes the agent thread in the same write when it
    can."""
    answering = AGENT_ANSWERS(conversation)
    retry = _retry(conversation)
    if pending is None:
        pending = (
            pending_messages(conversation, conversation.turn_upto_seq if retry else None)
            if answering
            else []
        )
    with event_log.one_write(conversation, rows=[]):  # the row written out, not by the ORM
        if not pending:
            return _wind_down(conversation, answering, approved)
        upto = conversation.turn_upto_seq if retry else pending[-1].seq
        attempt = (conversation.turn_attempts if retry else 0) + 1
        _write(conversation, turn_upto_seq=upto, turn_attempts=attempt)
        runs = attempt <= poppy_settings.TURN_MAX_ATTEMPTS
        took_thread = runs and _take_own_thread(conversation, owner)
    return TurnClaim(
        conversation=conversation,
        answered_seq=conversation.answered_seq,
        upto_seq=upto,
        attempt=attempt,
        seen_seq=upto if retry else conversation.last_seq,
        pending=pending if took_thread else None,
    )


def _wind_down(conversation: Conversation, answering: bool, approved: bool | None) -> NoTurn:
    """Nothing left to answer: run what staff approved meanwhile (``approved``, read since the
    lock; None: read it now), or go idle and free the lease (in the caller's
    :func:`event_log.one_write` block)."""
    if approved is None:
        approved = bool(approved_action_ids(conversation.id))
    if approved:
        return NoTurn.APPROVALS
    idle = Status.IDLE if answering else None
    _write(conversation, status=idle, lease_owner=None, lease_expires_at=None)
    return NoTurn.DONE


def answered(conversation: Conversation) -> None:
    """The turn's messages are answered (by its reply, or by the failed-turn message)."""
    _write(
        conversation,
        answered_seq=max(conversation.answered_seq, conversation.turn_upto_seq),
        turn_attempts=0,
    )


@dataclass(frozen=True)
class Committed:
    """What a turn's commit did besides writing the outcome."""

    #: It freed the agent thread (the conversation is its own thread root).
    thread_freed: bool
    #: Nothing was left to answer or run: the conversation went idle, its lease was freed.
    done: bool


@dataclass
class Answering:
    """A turn's commit in progress (:func:`answering`)."""

    conversation: Conversation
    #: Whether the turn's outcome is to be written: the agent may speak, and no reply of
    #: this turn is written yet (a retried turn's).
    may_write: bool
    committed: Committed | None = None


@contextmanager
def answering(
    conversation_id: str, owner: str, *, message_id: str, seen_seq: int
) -> Iterator[Answering]:
    """Commit a turn, only while ``owner``'s lease holds (else :class:`LeaseLost`): the
    block writes the outcome when :attr:`Answering.may_write`; then the turn's messages are
    answered, its agent thread freed, and with nothing left to answer the conversation goes
    idle and its lease is freed, all in the same write as the outcome (one statement on
    PostgreSQL, one nudge). ``seen_seq``: the claim's :attr:`TurnClaim.seen_seq`. In a
    transaction."""
    conversation = lock_owned(conversation_id, owner)
    # Read after the lock, not in the locking read: under READ COMMITTED that read's
    # subqueries would see the world before it waited for the lock.
    already, approved = backends.for_writing(Conversation).reply_written_and_actions_approved(
        conversation.id, message_id, ActionStatus.APPROVED
    )
    # Has the log grown since the claim read it? If not, no message is left to answer (and
    # the log is not read again to find none).
    newer = conversation.last_seq > max(seen_seq, conversation.turn_upto_seq)
    turn = Answering(conversation, AGENT_MAY_WRITE(conversation) and not already)
    with event_log.one_write(conversation, rows=[]):
        yield turn
        answered(conversation)
        thread_freed = _give_back_own_thread(conversation, owner)
        still = AGENT_ANSWERS(conversation)
        done = not (still and newer and pending_messages(conversation)) and (
            _wind_down(conversation, still, approved) is NoTurn.DONE
        )
        turn.committed = Committed(thread_freed=thread_freed, done=done)
