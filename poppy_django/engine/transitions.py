"""A turn's database transitions: claim, prepare, commit or fail, each under the lock.

Each function here is one job on a database thread of the engine (synchronous, in its own
transaction); :mod:`poppy_django.engine.turns` runs them in order around the model.

- *claim* (locked): fixes the turn's messages (``turn_upto_seq``) so a retry after a crash
  answers the same ones, with the same company message id and action keys, and counts the
  attempt: after ``TURN_MAX_ATTEMPTS`` the turn is answered with the failed-turn message.
  It takes the agent thread (one turn at a time in a conversation and its Direct
  Conversation) in the same write when it can;
- *prepare*: otherwise waits for the agent thread, then reads the principal, actor and
  thread;
- *commit* (locked): writes the reply and moves ``answered_seq`` in one transaction, only
  while the lease is still ours, so a reply is written exactly once; with nothing left to
  answer, the same write sets the conversation idle and frees its lease and thread.
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import transaction
from django.utils import timezone

from poppy_django import ids, observe, signals
from poppy_django.agent import memory
from poppy_django.agent.model_api import TurnInput
from poppy_django.agent.runtime import TurnOutcome, TurnRequest, resolve_actor
from poppy_django.conf import poppy_settings
from poppy_django.engine import approvals, leases
from poppy_django.engine.heartbeat import Heartbeat
from poppy_django.engine.leases import LeaseLost
from poppy_django.models import (
    ActionStatus,
    AgentThread,
    Conversation,
    Event,
    EventType,
    Responder,
    Status,
)
from poppy_django.observe import tracing
from poppy_django.store import backends, event_log, tags, wire
from poppy_django.verifier import Actor, Principal

logger = logging.getLogger("poppy_django.turns")


@dataclass(frozen=True)
class Claimed:
    """The conversation and its messages as a claim that also took the agent thread read
    them under its lock, so the turn need not read them again."""

    conversation: Conversation
    pending: list[Event]


@dataclass(frozen=True)
class TurnSlot:
    """The turn in flight, as fixed (and persisted) before anything can fail."""

    conversation_id: str
    thread_root_id: str
    turn_id: str
    #: The company message this turn writes, whatever happens: reply or failed-turn message.
    message_id: str
    upto_seq: int
    attempt: int
    #: Every turn-starting message up to this seq is answered by this turn: a later one
    #: is looked for at commit only if the log grew past it.
    seen_seq: int = 0
    #: Set when the claim took the agent thread too.
    claimed: Claimed | None = field(default=None, compare=False, repr=False)
    #: The turn's request, prepared in the claim's own database job when the claim took the
    #: agent thread (or what preparing it raised, raised again once the turn holds the thread).
    started: TurnRequest | Exception | None = field(default=None, compare=False, repr=False)


class Claim(enum.Enum):
    #: Nothing left to answer: the conversation is idle and the lease released.
    DONE = "done"
    #: No message to answer, but staff approved an action meanwhile: run it first.
    APPROVALS = "approvals"


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


def claim(conversation_id: str, owner: str) -> TurnSlot | Claim:
    """The next turn to run (its attempt counted), or why there is none."""
    with transaction.atomic():
        return _claim_locked(leases.lock_owned(conversation_id, owner), owner)


def _claim_locked(
    conversation: Conversation, owner: str, approved: bool | None = None
) -> TurnSlot | Claim:
    """:func:`claim` on a conversation locked under ``owner``'s lease; ``approved``: whether
    staff approved actions to run, when already read since the lock (None: read it here if
    it matters)."""
    answering = conversation.status == Status.WORKING and conversation.responder == Responder.AGENT
    retry = conversation.turn_upto_seq > conversation.answered_seq
    pending = (
        pending_messages(conversation, conversation.turn_upto_seq if retry else None)
        if answering
        else []
    )
    with event_log.one_write(conversation, rows=[]):  # the row written out, not by the ORM
        if not pending:
            return _wind_down(conversation, answering, approved)
        if not retry:
            conversation.turn_upto_seq = pending[-1].seq
            conversation.turn_attempts = 0
        conversation.turn_attempts += 1
        event_log.save(conversation, "turn_upto_seq", "turn_attempts")
        runs = conversation.turn_attempts <= poppy_settings.TURN_MAX_ATTEMPTS
        took_thread = runs and leases.take_own_thread(conversation, owner)
    turn_id = f"{conversation.answered_seq}-{conversation.turn_upto_seq}"
    return TurnSlot(
        conversation_id=conversation.id,
        thread_root_id=conversation.thread_root_id,
        turn_id=turn_id,
        message_id=ids.company_message_id(conversation.id, turn_id),
        upto_seq=conversation.turn_upto_seq,
        attempt=conversation.turn_attempts,
        seen_seq=conversation.turn_upto_seq if retry else conversation.last_seq,
        claimed=Claimed(conversation, pending) if took_thread else None,
    )


def _wind_down(conversation: Conversation, answering: bool, approved: bool | None) -> Claim:
    """Nothing left to answer: run what staff approved meanwhile (``approved``, read since the
    lock; None: read it now), or go idle and free the lease (in the caller's
    :func:`event_log.one_write` block)."""
    if approved is None:
        approved = bool(approvals.approved_ids(conversation.id))
    if approved:
        return Claim.APPROVALS
    if answering:
        event_log.set_state(conversation, status=Status.IDLE)
    leases.release(conversation)
    return Claim.DONE


def prepare(slot: TurnSlot) -> TurnRequest:
    """Everything the model needs, read once the agent thread is ours: the conversation
    and its messages as claimed, or read again after waiting for the thread."""
    if slot.claimed is not None:
        return _request(slot, slot.claimed.conversation, slot.claimed.pending)
    with transaction.atomic():
        conversation = Conversation.objects.get(pk=slot.conversation_id)
        pending = pending_messages(conversation, slot.upto_seq)
        if not pending:
            raise LeaseLost(slot.conversation_id)  # answered meanwhile by another worker
        return _request(slot, conversation, pending)


def _request(slot: TurnSlot, conversation: Conversation, pending: list[Event]) -> TurnRequest:
    principal = Principal.from_dict(pending[-1].meta["principal"])
    actor = resolve_actor(principal)  # once per turn: ACTOR_FOR may be costly
    history = memory.window_of(conversation.thread_root_id, actor.id)
    if not history:  # no thread yet (or an empty one): make it, with a sign-in transcript
        history = _start_thread(conversation, actor, first_seq=pending[0].seq)
    latest = pending[-1].payload["message"]
    return TurnRequest(
        conversation_id=conversation.id,
        turn_id=slot.turn_id,
        message_id=slot.message_id,
        answered_message_ids=[event.message_id or "" for event in pending],
        agent_name=conversation.agent_name,
        principal=principal,
        actor=actor,
        inputs=[
            TurnInput(
                text=event.payload["message"].get("text"),
                data=event.payload["message"].get("data"),
                sender=event.payload["message"]["sender"],
            )
            for event in pending
        ],
        history=history,
        received_at=pending[0].created_at,
        page_context={
            "channel": "poppy",
            "poppy": {
                "conversation_id": conversation.id,
                "direct": conversation.is_direct,
                "sender": latest["sender"],
                "signed_in": principal.signed_in,
                "context": conversation.context,
            },
        },
    )


def _start_thread(
    conversation: Conversation, actor: Actor, *, first_seq: int
) -> list[dict[str, str]]:
    """The window of an actor whose thread is empty or missing: a new thread, which after
    sign-in starts with a transcript of before (its window, read no further).

    The transcript quotes the newest ``THREAD_HISTORY_ENTRIES`` messages, not the whole log;
    a new thread and its transcript are written together.
    """
    root_id = conversation.thread_root_id
    with transaction.atomic():
        thread, created = AgentThread.objects.get_or_create(
            conversation_id=root_id, actor_id=actor.id
        )
        if not created:
            return memory.window(thread)
        if not AgentThread.objects.filter(conversation_id=root_id).exclude(pk=thread.pk).exists():
            return []
        newest = Event.objects.filter(
            conversation=conversation, type=EventType.MESSAGE, seq__lt=first_seq
        ).order_by("-seq")[: poppy_settings.THREAD_HISTORY_ENTRIES]
        lines = [
            f"{'User' if e.role == 'user' else 'Company'}: {e.payload['message'].get('text', '')}"
            for e in reversed(list(newest))
        ]
        if not lines:
            return []
        transcript = [{"role": "system", "text": "What was said before:\n" + "\n".join(lines)}]
        memory.append(thread, transcript)
        return transcript


@dataclass(frozen=True)
class Committed:
    """What a turn's commit did besides writing the outcome."""

    #: It freed the agent thread (the conversation is its own thread root).
    thread_freed: bool
    #: Nothing was left to answer or run: the conversation went idle, its lease was freed.
    done: bool


def commit(request: TurnRequest, outcome: TurnOutcome, owner: str, seen_seq: int = 0) -> Committed:
    """Write the turn's outcome once, and only while the lease is still ours; with nothing
    left to do, end the conversation's work in the same write (one nudge for the reply and
    the idle state). ``seen_seq``: its claim's :attr:`TurnSlot.seen_seq`."""
    with transaction.atomic():
        conversation = leases.lock_owned(request.conversation_id, owner)
        already, approved = _reply_written_and_actions_approved(conversation, request.message_id)
        # Has the log grown since the claim read it? If not, no message is left to answer
        # (and the log is not read again to find none).
        newer = conversation.last_seq > max(seen_seq, conversation.turn_upto_seq)
        with event_log.one_write(conversation, rows=[]):  # the events and the row at once
            if _may_write(conversation) and not already:
                _write_outcome(conversation, request, outcome)
            _answered(conversation)
            thread_freed = leases.give_back_own_thread(conversation, owner)
            answering = (
                conversation.status == Status.WORKING and conversation.responder == Responder.AGENT
            )
            done = not (answering and newer and pending_messages(conversation)) and (
                _wind_down(conversation, answering, approved) is Claim.DONE
            )
    return Committed(thread_freed=thread_freed, done=done)


def _reply_written_and_actions_approved(
    conversation: Conversation, message_id: str
) -> tuple[bool, bool]:
    """After the commit's lock, in one statement: whether the reply is already written (a
    retried turn's), and whether staff approved actions meanwhile. Read after the lock, not
    in the locking read: under READ COMMITTED that read's subqueries would see the world
    before it waited for the lock."""
    return backends.for_writing(Conversation).reply_written_and_actions_approved(
        conversation.id, message_id, ActionStatus.APPROVED
    )


def fail(slot: TurnSlot, owner: str, error: str) -> None:
    """End the turn with the failed-turn message under its own message id, once."""
    with transaction.atomic():
        conversation = leases.lock_owned(slot.conversation_id, owner)
        if conversation.answered_seq >= slot.upto_seq:
            return
        already = event_log.has_message(conversation, slot.message_id)
        with event_log.one_write(conversation):
            if _may_write(conversation) and not already:
                event_log.append_company_message(
                    conversation,
                    message_id=slot.message_id,
                    text=poppy_settings.texts["failed_turn"],
                    meta={"turn": slot.turn_id, "failed": True},
                )
            _answered(conversation)
    observe.moment(
        "turn_failed",
        signals.turn_failed,
        level=logging.ERROR,
        conversation_id=slot.conversation_id,
        turn_id=slot.turn_id,
        error=error,
    )


def _may_write(conversation: Conversation) -> bool:
    """Whether a turn's outcome is written: not into a closed conversation, and never while a
    person holds it (one who joined while the turn ran answers the messages themselves)."""
    return conversation.status != Status.CLOSED and conversation.responder != Responder.HUMAN


def _answered(conversation: Conversation) -> None:
    conversation.answered_seq = max(conversation.answered_seq, conversation.turn_upto_seq)
    conversation.turn_attempts = 0
    event_log.save(conversation, "answered_seq", "turn_attempts")


def _write_outcome(conversation: Conversation, request: TurnRequest, outcome: TurnOutcome) -> None:
    texts = poppy_settings.texts
    meta = {"turn": request.turn_id}
    if outcome.authorization is not None:
        error, scope = outcome.authorization
        payload: dict[str, Any] = {"error": error}
        if scope:
            payload["scope"] = scope
        said = outcome.text.strip()
        if conversation.is_direct:
            event_log.append(conversation, EventType.AUTHORIZATION, payload, meta=meta)
            ask = texts[error].format(scope=scope or "another permission")
            event_log.append_company_message(
                conversation,
                message_id=request.message_id,
                text=f"{said} {ask}" if said else ask,
                meta=meta,
            )
        else:
            # Text streamed before the refused call is written, so its pieces have a message.
            if said:
                event_log.append_company_message(
                    conversation, message_id=request.message_id, text=said, meta=meta
                )
            event_log.append(conversation, EventType.AUTHORIZATION, payload, meta=meta)
        _remember(conversation, request, said or None)
        return
    text = outcome.message_text()
    event_log.append_company_message(
        conversation,
        message_id=request.message_id,
        text=text,
        data=outcome.message_data(),
        meta=meta,
    )
    _tag(conversation, request, outcome)
    _remember(conversation, request, text)


def _tag(conversation: Conversation, request: TurnRequest, outcome: TurnOutcome) -> None:
    """The desk's tags the turn gives the conversation: its tools' (``ToolContext.tag``) and
    ``TAG_RULES``' for what the customer said; each recorded on the desk's log once."""
    said = [item.text for item in request.inputs if item.text]
    tags.add(conversation, outcome.tags, by="company_agent")
    tags.add(conversation, tags.by_rules(said), by="rule")


def _remember(conversation: Conversation, request: TurnRequest, reply: str | None) -> None:
    """Add the turn to its actor's thread, so the next turn sees what was said."""
    memory.append_to(
        conversation.thread_root_id,
        request.actor.id,
        [
            *({"role": "user", "text": item.render()} for item in request.inputs),
            *([{"role": "assistant", "text": reply}] if reply is not None else []),
        ],
    )


# -- one database job each, from the loop ----------------------------------------------


def begin(holder: leases.Holder, heartbeat: Heartbeat) -> TurnSlot | Claim | None:
    """Take the lease (None: another worker holds it) and, unless staff approved actions to
    run first, claim the next turn in the same transaction; the heartbeat renews the lease
    from its commit on (a renewal before it would not see the lease yet). One database job,
    one hop from the loop and back."""
    conversation_id, owner = holder.conversation_id, holder.owner
    with transaction.atomic():
        conversation = leases.acquire_locked(conversation_id, owner)
        if conversation is None:
            return None
        approved = bool(approvals.approved_ids(conversation_id))
        slot = None if approved else _claim_locked(conversation, owner, approved=False)
    heartbeat.hold(holder)
    if slot is None:  # approved actions run under the lease, outside its transaction
        return next_claim(conversation_id, owner)
    return prepared(slot)


def next_claim(conversation_id: str, owner: str) -> TurnSlot | Claim:
    """Run what staff approved, then claim the next turn, and when the claim took the agent
    thread, prepare the turn too (one job on a database thread, not three)."""
    approvals.run_approved(conversation_id, owner)
    return prepared(claim(conversation_id, owner))


def prepared(slot: TurnSlot | Claim) -> TurnSlot | Claim:
    """A slot whose claim took the agent thread, with its turn started (or the exception
    starting it raised: the turn holds the thread, so it fails there, freeing it)."""
    if not isinstance(slot, TurnSlot) or slot.claimed is None:
        return slot
    try:
        return replace(slot, started=start_turn(slot))
    except Exception as exc:
        return replace(slot, started=exc)


def start_turn(slot: TurnSlot) -> TurnRequest:
    """Prepare the turn and say it started (the ``turn_started`` moment)."""
    request = prepare(slot)
    observe.moment(
        "turn_started",
        signals.turn_started,
        conversation_id=slot.conversation_id,
        turn_id=slot.turn_id,
        message_ids=request.answered_message_ids,
        waited=_waited(request),
    )
    return request


def _waited(request: TurnRequest) -> float | None:
    """Seconds from the acknowledgement of the oldest message the turn answers to now."""
    if request.received_at is None:
        return None
    return round(max(0.0, (timezone.now() - request.received_at).total_seconds()), 3)


def commit_and_finish(
    request: TurnRequest, outcome: TurnOutcome, owner: str, slot: TurnSlot, began: float
) -> Committed:
    """:func:`commit`, then the ``turn_finished`` moment: one database job."""
    with tracing.span("poppy.commit", conversation_id=slot.conversation_id, turn_id=slot.turn_id):
        committed = commit(request, outcome, owner, slot.seen_seq)
    observe.moment(
        "turn_finished",
        signals.turn_finished,
        conversation_id=slot.conversation_id,
        turn_id=slot.turn_id,
        message_id=slot.message_id,
        duration=round(time.monotonic() - began, 3),
    )
    return committed
