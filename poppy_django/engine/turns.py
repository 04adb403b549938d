"""Turns: one writer per conversation under a lease, answering the log's unanswered messages.

:func:`answer` is what a process's engine runs for a conversation (executors and the recovery
sweep hand it one; :func:`poppy_django.engine.loop.run_turns` waits for it from another
thread). It takes the conversation's lease, runs the actions staff approved, then repeats
claim → prepare → run → commit (:mod:`poppy_django.engine.transitions`, each a job on the
engine's database threads) until no user message is left unanswered. *Run* is the model
awaited on the engine's loop, sync tools on its database threads, bounded by
``TURN_TIMEOUT_SECONDS`` (past it the run is cancelled and nothing it still tries is
written), the engine's heartbeat keeping the leases.

An exception anywhere in a turn ends it the same way as a failing model: the failed-turn
message, under the turn's message id, and the conversation goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from asyncio import FIRST_COMPLETED
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, Protocol, TypeVar

from django.db import DatabaseError

from poppy_django import observe, signals
from poppy_django.agent import model_choice
from poppy_django.agent.guard import TurnAbandoned, TurnGuard
from poppy_django.agent.model_api import AsyncTurnModel, TurnModel
from poppy_django.agent.model_choice import build_model
from poppy_django.agent.runtime import TurnOutcome, TurnRequest, run_turn
from poppy_django.conf import poppy_settings
from poppy_django.engine import leases
from poppy_django.engine.heartbeat import Heartbeat
from poppy_django.engine.leases import new_owner
from poppy_django.engine.transitions import (
    TurnSlot,
    begin,
    commit_and_finish,
    fail,
    next_claim,
    start_turn,
)
from poppy_django.observe import tracing
from poppy_django.observe.dependencies import unavailable
from poppy_django.store.lifecycle import Committed, LeaseLost, NoTurn

logger = logging.getLogger("poppy_django.turns")

P = ParamSpec("P")
T = TypeVar("T")


class Running(Protocol):
    """What a turn needs of the engine running it (:class:`poppy_django.engine.loop.Engine`)."""

    heartbeat: Heartbeat

    def run_sync(
        self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> Awaitable[T]: ...

    def publish_delta(self, conversation_id: str, message_id: str, text: str) -> None: ...

    def deltas_sent(self, timeout: float = 1.0) -> Awaitable[None]: ...


def model_for(agent_name: str) -> TurnModel | AsyncTurnModel:
    """The model a setting names for this agent: no code change to switch (a test's own
    model, where one is in use)."""
    in_use = model_choice.model_under_test()
    if in_use is not None:
        return in_use
    return build_model(poppy_settings.MODELS.get(agent_name, poppy_settings.MODEL))


async def answer(running: Running, conversation_id: str, owner: str | None = None) -> None:
    """Answer everything unanswered in the conversation, if no one else is already on it,
    on ``running``'s loop: claims, commits and sync tools on its database threads, the model
    awaited here."""
    owner = owner or new_owner()
    holder = leases.Holder(conversation_id, owner)
    turn_id: str | None = None
    try:
        slot = await running.run_sync(begin, holder, running.heartbeat)
        if slot is None:
            return
        while slot is not NoTurn.DONE:
            if isinstance(slot, TurnSlot):
                turn_id = slot.turn_id
                if await _run_one(running, slot, holder):
                    return
            slot = await running.run_sync(next_claim, conversation_id, owner)
    except LeaseLost:
        await running.run_sync(
            observe.moment,
            "lease_lost",
            signals.lease_lost,
            level=logging.WARNING,
            conversation_id=conversation_id,
            turn_id=turn_id,
        )
    finally:
        running.heartbeat.drop(holder)


async def _run_one(running: Running, slot: TurnSlot, holder: leases.Holder) -> bool:
    """One turn, ended by its reply or by the failed-turn message: never left hanging.

    True when its commit also ended the conversation's work (nothing left to claim).
    """
    origin = slot.claimed.pending[0].meta if slot.claimed and slot.claimed.pending else {}
    with (
        tracing.taken_up(origin) as links,
        tracing.span(
            "poppy.turn", conversation_id=slot.conversation_id, turn_id=slot.turn_id, links=links
        ) as span,
    ):
        span.set_attribute("poppy.attempt", slot.attempt)
        return await _turn(running, slot, holder)


async def _turn(running: Running, slot: TurnSlot, holder: leases.Holder) -> bool:
    owner = holder.owner
    if slot.attempt > poppy_settings.TURN_MAX_ATTEMPTS:
        await _fail(running, slot, owner, f"gave up after {slot.attempt - 1} attempts")
        return False
    began = time.monotonic()
    committed: Committed | None = None
    try:
        async with holder.agent_thread(
            slot.thread_root_id, running.run_sync, taken=slot.claimed is not None
        ):
            prepared = slot.started
            if isinstance(prepared, Exception):
                raise prepared
            request = prepared if prepared is not None else await _step(running, start_turn, slot)
            outcome = await _run_bounded(running, request, holder)
            if holder.lost.is_set():
                raise LeaseLost(slot.conversation_id)
            if not outcome.failed:
                if outcome.text:  # its pieces reach readers before the message does
                    await running.deltas_sent()
                committed = await _step(
                    running, commit_and_finish, request, outcome, owner, slot, began
                )
                if committed.thread_freed:
                    holder.thread_given_back()
    except LeaseLost:
        raise
    except Exception as exc:  # planning, hooks, the agent, formatting, the commit...
        logger.exception("poppy: turn %s of %s failed", slot.turn_id, slot.conversation_id)
        await _fail(running, slot, owner, observe.describe_failure(exc))
        return False
    if outcome.failed:
        await _fail(running, slot, owner, outcome.error)
        return False
    return committed is not None and committed.done


async def _step(running: Running, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """One of the turn's own database steps (start, commit, fail), run once more on a fresh
    connection when the database failed under it: a PostgreSQL restarted mid-turn ends the
    connection a step holds ("terminating connection due to administrator command"). Each of
    these steps may run again: a reply or a failed-turn message is written once, under the
    lease, and a step that failed wrote nothing (its transaction is the server's to roll
    back). The engine's database thread dropped the broken connection, so the second try
    takes another from the pool."""
    try:
        return await running.run_sync(function, *args, **kwargs)
    except DatabaseError as exc:
        if not _out_of_reach(exc):
            raise
        logger.warning(
            "poppy: %s met the database out of reach (%s); trying once more",
            function.__name__,
            observe.describe_failure(exc),
        )
    return await running.run_sync(function, *args, **kwargs)


async def _fail(running: Running, slot: TurnSlot, owner: str, error: str) -> None:
    """The failed-turn message. If the database cannot take it even on a fresh connection,
    or comes back only after the lease has passed to another worker (the step waited out
    the outage on the pool while its renewals failed), the turn is still counted as failed
    (its ``turn_failed`` moment, at once) and the error raised: the conversation stays
    working under its lease, which the recovery sweep takes up once the lease expires,
    answering the message then."""
    try:
        await _step(running, fail, slot, owner, error)
    except (DatabaseError, LeaseLost) as exc:
        if isinstance(exc, LeaseLost) or _out_of_reach(exc):
            observe.moment(
                "turn_failed",
                signals.turn_failed,
                level=logging.ERROR,
                at_once=True,
                conversation_id=slot.conversation_id,
                turn_id=slot.turn_id,
                error=error,
            )
        raise


def _out_of_reach(exc: DatabaseError) -> bool:
    """The database itself out of reach (not a statement's error, which a retry repeats)."""
    found = unavailable(exc)
    return found is not None and found.dependency == "database"


async def _run_bounded(
    running: Running, request: TurnRequest, holder: leases.Holder
) -> TurnOutcome:
    """Run the model as a task of its own; past the time limit (or once the lease is lost),
    cancel it and refuse whatever it still tries to write."""
    guard = TurnGuard()

    def relay(piece: str) -> None:
        if guard.abandoned:
            raise TurnAbandoned("the turn passed its time limit")
        running.publish_delta(request.conversation_id, request.message_id, piece)

    loop = asyncio.get_running_loop()
    lost: asyncio.Future[None] = loop.create_future()

    def settle() -> None:
        if not lost.done():
            lost.set_result(None)

    def lease_lost() -> None:
        loop.call_soon_threadsafe(settle)

    forget = holder.on_lost(lease_lost)
    model: asyncio.Future[TurnOutcome] = asyncio.ensure_future(
        run_turn(request, model_for, relay, guard, running.run_sync)
    )
    limit = poppy_settings.TURN_TIMEOUT_SECONDS
    try:
        waited: set[asyncio.Future[Any]] = {model, lost}
        done, _ = await asyncio.wait(waited, timeout=limit, return_when=FIRST_COMPLETED)
        if model in done:
            return model.result()
    finally:
        forget()
        if not model.done():
            model.cancel()
    # Whatever the cancelled run still does (a sync tool on a database thread, an action's
    # transaction) is refused from now on; an action committing right now finishes first.
    await running.run_sync(guard.abandon)
    if holder.lost.is_set():
        raise LeaseLost(request.conversation_id)
    return TurnOutcome(failed=True, error=f"timed out after {limit} s")


__all__ = ["LeaseLost", "answer", "model_for", "new_owner"]
