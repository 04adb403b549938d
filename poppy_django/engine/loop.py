"""The turn engine: one asyncio loop per process, on which many turns await their model at once.

A real turn is seconds of waiting on a model provider. Each process that runs turns (a Celery
worker process, whatever its pool, and the web process of the embedded default) starts one
:class:`Engine` when it first needs it, in that process (after a fork, a new one):

- *one event loop*, in a thread of its own, runs every turn of the process as a task: the
  model is awaited there (pydantic-ai streaming over httpx, the scripted model's ``#slow``
  with ``asyncio.sleep``), and so are ``async def`` tools;
- *a bounded set of database threads* (:mod:`~poppy_django.engine.database_threads`,
  ``POPPY["EXECUTOR_THREADS"]``) runs everything
  synchronous — the ORM work of claims and commits, sync tools, actions, approvals — each
  with one database connection of its own, kept between jobs: connections are bounded per
  process, never one per turn;
- *one heartbeat thread* (:mod:`~poppy_django.engine.heartbeat`) renews every lease the
  process holds (conversations and agent threads) in one statement each
  ``HEARTBEAT_SECONDS``, and tells a turn whose lease was taken over to stop;
- *one publishing thread* (:mod:`~poppy_django.engine.deltas`) relays text deltas to the
  fan-out in the order they were produced, a tick's worth in one message
  (``DELTA_TICK_SECONDS``), so a slow Redis never blocks the loop and a token-by-token
  model costs one publish a tick, not one a token;
- *a bound on turns in flight* (``POPPY["TURNS_IN_FLIGHT"]``): :meth:`Engine.reserve`
  waits for a free place, so a Celery task waiting there stops its worker taking messages,
  and the embedded executor's dispatches past the bound wait in a queue of conversations
  (deduplicated: at most one entry per conversation, whose messages are in the database).

The per-conversation lease stays the guarantee (:mod:`poppy_django.engine.turns`): the engine only
decides where and how many turns run at once. A process that dies takes its turns with it;
their leases expire and the recovery sweep of another process takes them up.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from django.core.signals import setting_changed
from django.dispatch import receiver

from poppy_django.conf import poppy_settings
from poppy_django.engine.database_threads import DatabaseThreads
from poppy_django.engine.deltas import DeltaPublisher
from poppy_django.engine.heartbeat import Heartbeat
from poppy_django.engine.turns import answer
from poppy_django.observe import heartbeats, metrics, tracing

logger = logging.getLogger("poppy_django.engine")

P = ParamSpec("P")
T = TypeVar("T")

#: What the engine runs for a conversation, on its loop: :func:`poppy_django.engine.turns.answer`.
RunTurns = Callable[["Engine", str, "str | None"], Awaitable[None]]


@dataclass
class Counters:
    """What the engine has in flight now, and the most it had at once since it started."""

    in_flight: int = 0
    most_in_flight: int = 0
    started: int = 0


class Engine:
    """This process's loop, threads and bound on turns in flight (see the module's text)."""

    def __init__(self, *, run: RunTurns, turns_in_flight: int, threads: int) -> None:
        self.pid = os.getpid()
        self.capacity = turns_in_flight
        self.loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(
            target=self._run_loop, name="poppy-engine", daemon=True
        )
        self._run = run
        self.database = DatabaseThreads(threads, "poppy-turn")
        self.heartbeat = Heartbeat()
        self.deltas = DeltaPublisher()
        self.counters = Counters()
        self._places = threading.Condition()
        self._free = turns_in_flight
        #: Conversations dispatched past the bound, in order, at most once each.
        self._queued: OrderedDict[str, None] = OrderedDict()
        self._stopping = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop_thread.start()

    # -- places ---------------------------------------------------------------------------

    def reserve(self, timeout: float | None = None) -> bool:
        """Wait for a free place for one turn (at most ``timeout`` seconds); True once held.

        The caller then :meth:`start` s a turn in it, or gives it back with :meth:`give_back`.
        """
        with self._places:
            if not self._places.wait_for(lambda: self._free > 0 or self._stopping, timeout):
                return False
            if self._stopping:
                return False
            self._free -= 1
            return True

    @property
    def stopping(self) -> bool:
        """It takes no more turns (:meth:`stop` was called)."""
        return self._stopping

    def give_back(self) -> None:
        """Free a reserved place (or one whose turn ended): a queued conversation takes it."""
        with self._places:
            if self._queued and not self._stopping:
                conversation_id, _ = self._queued.popitem(last=False)
                self._launch(conversation_id, None)
                return
            self._free += 1
            self._places.notify()

    def start(self, conversation_id: str, owner: str | None = None) -> Future[None]:
        """Run the conversation's turns in a place :meth:`reserve` gave."""
        with self._places:
            return self._launch(conversation_id, owner)

    def submit(self, conversation_id: str, owner: str | None = None) -> Future[None]:
        """Wait for a place, then run the conversation's turns (what a Celery task does)."""
        while not self.reserve():
            if self._stopping:
                raise RuntimeError("the turn engine is stopping")
        return self.start(conversation_id, owner)

    def dispatch_soon(self, conversation_id: str) -> None:
        """Run the conversation's turns now if a place is free, else when one frees (the
        embedded executor: a web request never waits for a place)."""
        with self._places:
            if self._free > 0 and not self._stopping:
                self._free -= 1
                self._launch(conversation_id, None)
            else:
                self._queued[conversation_id] = None

    def _launch(self, conversation_id: str, owner: str | None) -> Future[None]:
        """Hand the turns to the loop (``self._places`` held, a place taken for it)."""
        self.counters.started += 1
        self.counters.in_flight += 1
        self.counters.most_in_flight = max(self.counters.most_in_flight, self.counters.in_flight)
        metrics.turns_in_flight.add(1)
        # The turn outlives its dispatcher (a Celery task, a request): it takes the trace and
        # the request id of the message that started it onto the loop.
        turns = self._turns(conversation_id, owner, tracing.carried())
        return asyncio.run_coroutine_threadsafe(turns, self.loop)

    async def _turns(
        self, conversation_id: str, owner: str | None, carried: tracing.Carried
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            with carried.resumed():
                await self._run(self, conversation_id, owner)
        except Exception:
            logger.exception("poppy: turns of %s failed", conversation_id)
        finally:
            self._tasks.discard(task)
            with self._places:
                self.counters.in_flight -= 1
            metrics.turns_in_flight.add(-1)
            self.give_back()

    # -- the loop's helpers -----------------------------------------------------------------

    async def run_sync(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run blocking (ORM, sync tool) work on a database thread and await its result, in
        a copy of the caller's context (its span, its request id: the log lines and spans of
        the work belong to the turn)."""
        context = contextvars.copy_context()
        job = self.database.submit(context.run, function, *args, **kwargs)
        return await asyncio.wrap_future(job)

    def publish_delta(self, conversation_id: str, message_id: str, text: str) -> None:
        """Relay a piece of a reply being written (within a tick, never blocking the loop)."""
        self.deltas.publish(conversation_id, message_id, text)

    async def deltas_sent(self, timeout: float = 1.0) -> None:
        """Wait (at most ``timeout`` s) until the deltas given so far are published: a turn
        commits its reply after its pieces, so readers get them before the message. Short:
        with Redis away, a reply is not held back for pieces that may never go out."""
        loop = asyncio.get_running_loop()
        sent: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not sent.done():
                sent.set_result(None)

        def done() -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(settle)

        self.deltas.flush(done)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(sent, timeout)

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    # -- stopping -----------------------------------------------------------------------------

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until no turn is in flight or queued (at most ``timeout`` s); True if none."""
        with self._places:
            return self._places.wait_for(
                lambda: self._free == self.capacity and not self._queued, timeout
            )

    def idle(self) -> bool:
        with self._places:
            return self._free == self.capacity and not self._queued

    def stop(self, wait: bool = True) -> None:
        """Finish the turns in flight and queued (``wait``), then stop the loop and threads.

        Without ``wait``, turns in flight are cancelled: their leases expire and the
        recovery sweep of another process takes them up.
        """
        if wait:
            self.drain()
        with self._places:
            self._stopping = True
            self._queued.clear()
            self._places.notify_all()

        async def cancel_all() -> None:
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.wait(set(self._tasks), timeout=5)

        if self._loop_thread.is_alive():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(cancel_all(), self.loop).result(timeout=10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._loop_thread.join(timeout=10)
        self.heartbeat.stop(wait)
        heartbeats.stopped()
        self.deltas.stop(wait)
        self.database.stop(wait)
        if not self.loop.is_running():
            self.loop.close()


_engine: Engine | None = None
_engine_lock = threading.Lock()
#: An engine standing in for the process's in this context (:mod:`poppy_django.engine.inline`).
_here: ContextVar[Engine | None] = ContextVar("poppy_engine_here", default=None)


@contextlib.contextmanager
def engine_here(engine: Engine) -> Iterator[Engine]:
    """:func:`current` is ``engine`` in the block (and the tasks and threads it starts)."""
    token = _here.set(engine)
    try:
        yield engine
    finally:
        _here.reset(token)


def current() -> Engine:
    """This process's engine, started at first use (and again in a forked child)."""
    global _engine
    standing_in = _here.get()
    if standing_in is not None:
        return standing_in
    engine = _engine
    if engine is not None and engine.pid == os.getpid():
        return engine
    with _engine_lock:
        if _engine is None or _engine.pid != os.getpid():
            # A forked child inherits the parent's engine object but none of its threads.
            _engine = Engine(
                run=answer,
                turns_in_flight=poppy_settings.TURNS_IN_FLIGHT,
                threads=poppy_settings.EXECUTOR_THREADS,
            )
        return _engine


def run_turns(conversation_id: str, owner: str | None = None) -> None:
    """Answer everything unanswered in the conversation, if no one else is already on it;
    returns when done. The turns run on this process's engine once it has a free place for
    them: never call it from the engine's own loop."""
    current().submit(conversation_id, owner).result()


def running() -> Engine | None:
    """This process's engine if it started (no engine is started by asking)."""
    engine = _engine
    return engine if engine is not None and engine.pid == os.getpid() else None


def stop(wait: bool = True) -> None:
    """Stop this process's engine (the next :func:`current` starts a new one)."""
    global _engine
    with _engine_lock:
        engine, _engine = running(), None
    if engine is not None:
        engine.stop(wait)


@receiver(setting_changed)
def _restart_on_change(*, setting: str, **kwargs: Any) -> None:
    """A changed bound or thread count applies to the next engine (tests)."""
    if setting == "POPPY" and running() is not None:
        engine = running()
        if engine is not None and (
            engine.capacity != poppy_settings.TURNS_IN_FLIGHT
            or len(engine.database._threads) != poppy_settings.EXECUTOR_THREADS
        ):
            stop(wait=True)
