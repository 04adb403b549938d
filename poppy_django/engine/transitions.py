"""A turn's database steps, each one job on a database thread of the engine (synchronous, in
its own transaction); :mod:`poppy_django.engine.turns` runs them in order around the model.

The conversation's side of each step is its lifecycle's (:mod:`poppy_django.store.lifecycle`:
the lease, the claim, the answered messages, winding down); this module adds the turn's:

- *begin* / *claim*: the turn's slot (its id, its company message id) from the lifecycle's
  claim, which fixed its messages so a retry after a crash answers the same ones, with the
  same company message id and action keys, and took the agent thread when it could;
- *prepare*: everything the model needs (the principal, the actor, the thread's window);
- *commit*: the reply written once, only while the lease is still ours, in the lifecycle's
  one write of the turn's end; *fail*: the failed-turn message instead.
"""

from __future__ import annotations

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
from poppy_django.models import AgentThread, Conversation, Event, EventType
from poppy_django.observe import tracing
from poppy_django.store import event_log, lifecycle, tags
from poppy_django.verifier import Actor, Principal

logger = logging.getLogger("poppy_django.turns")


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
    #: Set when the claim took the agent thread too (its messages read under the lock).
    claimed: lifecycle.TurnClaim | None = field(default=None, compare=False, repr=False)
    #: The turn's request, prepared in the claim's own database job when the claim took the
    #: agent thread (or what preparing it raised, raised again once the turn holds the thread).
    started: TurnRequest | Exception | None = field(default=None, compare=False, repr=False)


def claim(conversation_id: str, owner: str) -> TurnSlot | lifecycle.NoTurn:
    """The next turn to run (its attempt counted), or why there is none."""
    return _slot(lifecycle.claim(conversation_id, owner))


def _slot(claimed: lifecycle.TurnClaim | lifecycle.NoTurn) -> TurnSlot | lifecycle.NoTurn:
    """The turn's slot from the lifecycle's claim: the turn id and the company message id
    follow from the messages it answers."""
    if isinstance(claimed, lifecycle.NoTurn):
        return claimed
    conversation = claimed.conversation
    turn_id = f"{claimed.answered_seq}-{claimed.upto_seq}"
    return TurnSlot(
        conversation_id=conversation.id,
        thread_root_id=conversation.thread_root_id,
        turn_id=turn_id,
        message_id=ids.company_message_id(conversation.id, turn_id),
        upto_seq=claimed.upto_seq,
        attempt=claimed.attempt,
        seen_seq=claimed.seen_seq,
        claimed=claimed if claimed.pending is not None else None,
    )


def prepare(slot: TurnSlot) -> TurnRequest:
    """Everything the model needs, read once the agent thread is ours: the conversation
    and its messages as claimed, or read again after waiting for the thread."""
    claimed = slot.claimed
    if claimed is not None and claimed.pending is not None:
        return _request(slot, claimed.conversation, claimed.pending)
    with transaction.atomic():
        conversation = Conversation.objects.get(pk=slot.conversation_id)
        pending = lifecycle.pending_messages(conversation, slot.upto_seq)
        if not pending:
            raise lifecycle.LeaseLost(slot.conversation_id)  # answered meanwhile by another
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
    a new thread and its transcript are written together. A conversation's first thread (no
    transcript: the common first turn) is made in one statement where the store can.
    """
    root_id = conversation.thread_root_id
    if memory.made_alone(root_id, actor.id):
        return []
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


def commit(
    request: TurnRequest, outcome: TurnOutcome, owner: str, seen_seq: int = 0
) -> lifecycle.Committed:
    """Write the turn's outcome once, and only while the lease is still ours, in the write
    that ends the turn (one nudge for the reply and the idle state). ``seen_seq``: its
    claim's :attr:`TurnSlot.seen_seq`."""
    with (
        transaction.atomic(),
        lifecycle.answering(
            request.conversation_id, owner, message_id=request.message_id, seen_seq=seen_seq
        ) as turn,
    ):
        if turn.may_write:
            _write_outcome(turn.conversation, request, outcome)
    assert turn.committed is not None
    return turn.committed


def fail(slot: TurnSlot, owner: str, error: str) -> None:
    """End the turn with the failed-turn message under its own message id, once."""
    with transaction.atomic():
        conversation = lifecycle.lock_owned(slot.conversation_id, owner)
        if conversation.answered_seq >= slot.upto_seq:
            return
        already = event_log.has_message(conversation, slot.message_id)
        with event_log.one_write(conversation):
            if lifecycle.AGENT_MAY_WRITE(conversation) and not already:
                event_log.append_company_message(
                    conversation,
                    message_id=slot.message_id,
                    text=poppy_settings.texts["failed_turn"],
                    meta={"turn": slot.turn_id, "failed": True},
                )
            lifecycle.answered(conversation)
    observe.moment(
        "turn_failed",
        signals.turn_failed,
        level=logging.ERROR,
        conversation_id=slot.conversation_id,
        turn_id=slot.turn_id,
        error=error,
    )


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
        members=outcome.message_members(),
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
        conversation,
        request.actor.id,
        [
            *({"role": "user", "text": item.render()} for item in request.inputs),
            *([{"role": "assistant", "text": reply}] if reply is not None else []),
        ],
    )


# -- one database job each, from the loop ----------------------------------------------


def begin(holder: leases.Holder, heartbeat: Heartbeat) -> TurnSlot | lifecycle.NoTurn | None:
    """Take the lease (None: another worker holds it) and, unless staff approved actions to
    run first, claim the next turn in the same transaction (the lifecycle's
    :func:`~poppy_django.store.lifecycle.begin`); the heartbeat renews the lease from its
    commit on (a renewal before it would not see the lease yet). One database job, one hop
    from the loop and back."""
    begun = lifecycle.begin(holder.conversation_id, holder.owner)
    if begun is None:
        return None
    heartbeat.hold(holder)
    if begun is lifecycle.NoTurn.APPROVALS:  # run under the lease, outside its transaction
        return next_claim(holder.conversation_id, holder.owner)
    return prepared(_slot(begun))


def next_claim(conversation_id: str, owner: str) -> TurnSlot | lifecycle.NoTurn:
    """Run what staff approved, then claim the next turn, and when the claim took the agent
    thread, prepare the turn too (one job on a database thread, not three)."""
    approvals.run_approved(conversation_id, owner)
    return prepared(claim(conversation_id, owner))


def prepared(slot: TurnSlot | lifecycle.NoTurn) -> TurnSlot | lifecycle.NoTurn:
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
) -> lifecycle.Committed:
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
