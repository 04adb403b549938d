"""Turns: one writer per conversation under a lease, answering the log's unanswered messages.

``run_turns(conversation_id)`` is what executors run. It claims the conversation's lease,
then repeats plan → run → commit until no user message is left unanswered:

- *plan* (locked): fixes the turn's messages (``turn_upto_seq``) so a retry after a crash
  answers the same ones, with the same company message id and action keys;
- *run*: the model and tools, outside any transaction, with a heartbeat keeping the lease;
- *commit* (locked): writes the reply and moves ``answered_seq`` in one transaction, only
  while the lease is still ours, so a reply is written exactly once.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.db import close_old_connections, connection, transaction
from django.db.models import Q
from django.utils import timezone

from poppy_django import event_log, fanout, ids, observe, signals
from poppy_django.agent.model_api import TurnInput, TurnModel
from poppy_django.agent.model_choice import build_model
from poppy_django.agent.runtime import TurnOutcome, TurnRequest, resolve_actor, run_turn
from poppy_django.auth import Principal
from poppy_django.conf import poppy_settings
from poppy_django.models import AgentThread, Conversation, Event, EventType, Responder, Status

logger = logging.getLogger(__name__)


class LeaseLost(Exception):
    """Another worker took the conversation over: stop without writing."""


def dispatch_on_commit(conversation_id: str) -> None:
    """Hand the conversation to the configured executor once the transaction commits."""

    def dispatch() -> None:
        try:
            poppy_settings.EXECUTOR.dispatch(conversation_id)
        except Exception:
            # The message is committed and the conversation is ``working``: the reaper
            # dispatches it again, so the acknowledgement stands.
            logger.warning(
                "poppy: could not dispatch %s; the reaper will", conversation_id, exc_info=True
            )

    transaction.on_commit(dispatch)


def new_owner() -> str:
    return f"{socket.gethostname()[:24]}:{os.getpid()}:{secrets.token_hex(4)}"


# -- the lease ---------------------------------------------------------------------------


def _lease_until() -> Any:
    return timezone.now() + timedelta(seconds=poppy_settings.LEASE_SECONDS)


def acquire_lease(conversation_id: str, owner: str) -> bool:
    """Claim the conversation if no one holds it or the holder's claim expired."""
    free = (
        Q(lease_owner__isnull=True) | Q(lease_expires_at__lt=timezone.now()) | Q(lease_owner=owner)
    )
    claimed = (
        Conversation.objects.filter(pk=conversation_id)
        .filter(free)
        .update(lease_owner=owner, lease_expires_at=_lease_until())
    )
    return claimed == 1


def renew_lease(conversation_id: str, owner: str) -> bool:
    renewed = Conversation.objects.filter(pk=conversation_id, lease_owner=owner).update(
        lease_expires_at=_lease_until()
    )
    return renewed == 1


def _release(conversation: Conversation) -> None:
    conversation.lease_owner = None
    conversation.lease_expires_at = None
    conversation.save(update_fields=["lease_owner", "lease_expires_at", "updated_at"])


def _lock_owned(conversation_id: str, owner: str) -> Conversation:
    conversation = event_log.lock(conversation_id)
    if conversation.lease_owner != owner:
        raise LeaseLost(conversation_id)
    return conversation


@contextmanager
def heartbeat(conversation_id: str, owner: str) -> Iterator[threading.Event]:
    """Renew the lease in the background; the yielded event is set if it was lost."""
    lost = threading.Event()
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(poppy_settings.HEARTBEAT_SECONDS):
                if not renew_lease(conversation_id, owner):
                    lost.set()
                    return
        except Exception:
            logger.warning("poppy: heartbeat of %s failed", conversation_id, exc_info=True)
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"poppy-heartbeat-{conversation_id}", daemon=True)
    thread.start()
    try:
        yield lost
    finally:
        stop.set()
        thread.join()


# -- plan, run, commit -----------------------------------------------------------------


def _pending_messages(conversation: Conversation, upto_seq: int | None) -> list[Event]:
    events = Event.objects.filter(
        conversation=conversation,
        type=EventType.MESSAGE,
        role="user",
        seq__gt=conversation.answered_seq,
    )
    if upto_seq is not None:
        events = events.filter(seq__lte=upto_seq)
    return [
        event
        for event in events.order_by("seq")
        if "text" in event.payload["message"] or "data" in event.payload["message"]
    ]


def plan(conversation_id: str, owner: str) -> TurnRequest | None:
    """The next turn to run, or None (then the conversation is idle and the lease free)."""
    with transaction.atomic():
        conversation = _lock_owned(conversation_id, owner)
        answering = (
            conversation.status == Status.WORKING and conversation.responder == Responder.AGENT
        )
        retry = conversation.turn_upto_seq > conversation.answered_seq
        pending = (
            _pending_messages(conversation, conversation.turn_upto_seq if retry else None)
            if answering
            else []
        )
        if not pending:
            if answering:
                event_log.set_state(conversation, status=Status.IDLE)
            _release(conversation)
            return None
        if not retry:
            conversation.turn_upto_seq = pending[-1].seq
            conversation.save(update_fields=["turn_upto_seq", "updated_at"])
        principal = Principal.from_dict(pending[-1].meta["principal"])
        thread = _thread_for(conversation, principal, first_seq=pending[0].seq)
        turn_id = f"{conversation.answered_seq}-{conversation.turn_upto_seq}"
        latest = pending[-1].payload["message"]
        return TurnRequest(
            conversation_id=conversation.id,
            turn_id=turn_id,
            message_id=ids.company_message_id(conversation.id, turn_id),
            answers=[event.message_id or "" for event in pending],
            agent_name=conversation.agent_name,
            principal=principal,
            inputs=[
                TurnInput(
                    text=event.payload["message"].get("text"),
                    data=event.payload["message"].get("data"),
                    sender=event.payload["message"]["sender"],
                )
                for event in pending
            ],
            history=list(thread.history),
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


def _thread_for(conversation: Conversation, principal: Principal, *, first_seq: int) -> AgentThread:
    """The actor's thread; a new one after sign-in starts with a transcript of before."""
    actor = resolve_actor(principal)
    root_id = conversation.thread_root_id
    thread, created = AgentThread.objects.get_or_create(conversation_id=root_id, actor_id=actor.id)
    if created and AgentThread.objects.filter(conversation_id=root_id).count() > 1:
        before = Event.objects.filter(
            conversation=conversation, type=EventType.MESSAGE, seq__lt=first_seq
        ).order_by("seq")
        lines = [
            f"{'User' if e.role == 'user' else 'Company'}: {e.payload['message'].get('text', '')}"
            for e in before
        ]
        if lines:
            thread.history = [
                {"role": "system", "text": "What was said before:\n" + "\n".join(lines)}
            ]
            thread.save(update_fields=["history", "updated_at"])
    return thread


def commit(request: TurnRequest, outcome: TurnOutcome, owner: str) -> None:
    """Write the turn's outcome once, and only while the lease is still ours."""
    with transaction.atomic():
        conversation = _lock_owned(request.conversation_id, owner)
        already = Event.objects.filter(
            conversation=conversation, message_id=request.message_id
        ).exists()
        if conversation.status != Status.CLOSED and not already:
            _write_outcome(conversation, request, outcome)
        conversation.answered_seq = max(conversation.answered_seq, conversation.turn_upto_seq)
        conversation.save(update_fields=["answered_seq", "updated_at"])


def _write_outcome(conversation: Conversation, request: TurnRequest, outcome: TurnOutcome) -> None:
    texts = poppy_settings.texts
    meta = {"turn": request.turn_id}
    if outcome.authorization is not None:
        error, scope = outcome.authorization
        payload: dict[str, Any] = {"error": error}
        if scope:
            payload["scope"] = scope
        event_log.append(conversation, EventType.AUTHORIZATION, payload, meta=meta)
        if conversation.is_direct:
            event_log.append_company_message(
                conversation,
                message_id=request.message_id,
                text=texts[error].format(scope=scope or "another permission"),
                meta=meta,
            )
        _remember(conversation, request, None)
        return
    if outcome.failed:
        event_log.append_company_message(
            conversation, message_id=request.message_id, text=texts["failed_turn"], meta=meta
        )
        return
    text = outcome.message_text()
    event_log.append_company_message(
        conversation,
        message_id=request.message_id,
        text=text,
        data=outcome.message_data(),
        meta=meta,
    )
    _remember(conversation, request, text)


def _remember(conversation: Conversation, request: TurnRequest, reply: str | None) -> None:
    """Add the turn to its actor's thread, so the next turn sees what was said."""
    actor = resolve_actor(request.principal)
    thread = AgentThread.objects.select_for_update().get(
        conversation_id=conversation.thread_root_id, actor_id=actor.id
    )
    thread.history = [
        *thread.history,
        *({"role": "user", "text": item.render()} for item in request.inputs),
        *([{"role": "assistant", "text": reply}] if reply is not None else []),
    ]
    thread.save(update_fields=["history", "updated_at"])


def model_for(agent_name: str) -> TurnModel:
    """The model a setting names for this agent: no code change to switch."""
    return build_model(poppy_settings.MODELS.get(agent_name, poppy_settings.MODEL))


def run_turns(conversation_id: str, owner: str | None = None) -> None:
    """Answer everything unanswered in the conversation, if no one else is already on it."""
    owner = owner or new_owner()
    turn_id: str | None = None
    close_old_connections()
    try:
        if not acquire_lease(conversation_id, owner):
            return
        with heartbeat(conversation_id, owner) as lost:
            while (request := plan(conversation_id, owner)) is not None:
                turn_id = request.turn_id
                _run_one(request, owner, lost)
    except LeaseLost:
        observe.moment(
            "lease_lost",
            signals.lease_lost,
            level=logging.WARNING,
            conversation_id=conversation_id,
            turn_id=turn_id,
        )
    finally:
        close_old_connections()


def _run_one(request: TurnRequest, owner: str, lost: threading.Event) -> None:
    started = time.monotonic()
    observe.moment(
        "turn_started",
        signals.turn_started,
        conversation_id=request.conversation_id,
        turn_id=request.turn_id,
        message_ids=request.answers,
    )

    def relay(piece: str) -> None:
        fanout.publish_delta(request.conversation_id, request.message_id, piece)

    try:
        model = model_for(request.agent_name)
    except Exception as exc:  # a misconfigured model fails the turn, never the conversation
        logger.exception("poppy: no model for agent %s", request.agent_name)
        outcome = TurnOutcome(failed=True, error=observe.describe_failure(exc))
    else:
        outcome = run_turn(request, model, relay)
    if lost.is_set():
        raise LeaseLost(request.conversation_id)
    commit(request, outcome, owner)
    if outcome.failed:
        observe.moment(
            "turn_failed",
            signals.turn_failed,
            level=logging.ERROR,
            conversation_id=request.conversation_id,
            turn_id=request.turn_id,
            error=outcome.error,
        )
    else:
        observe.moment(
            "turn_finished",
            signals.turn_finished,
            conversation_id=request.conversation_id,
            turn_id=request.turn_id,
            message_id=request.message_id,
            duration=round(time.monotonic() - started, 3),
        )
