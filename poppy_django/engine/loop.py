"""The turn engine: one asyncio loop per process, on which many turns await their model at once.

A real turn is seconds of waiting on a model provider. Each process that runs turns (a Celery
worker process, whatever its pool, and the web process of the embedded default) starts one
:class:`Engine` when it first needs it, in that process (after a fork, a new one):

- *one event loop*, in a thread of its own, runs every turn of the process as a task: the
  model is awaited there (pydantic-ai streaming over httpx, the scripted model's ``#slow``
  with ``asyncio.sleep``), and so are ``async def`` tools;
- *a bounded set of database threads* (``POPPY["EXECUTOR_THREADS"]``) runs everything
  synchronous — the ORM work of claims and commits, sync tools, actions, approvals — each
  with one database connection of its own, kept between jobs: connections are bounded per
  process, never one per turn;
- *one heartbeat thread* renews every lease the process holds (conversations and agent
  threads) in one statement each ``HEARTBEAT_SECONDS``, and tells a turn whose lease was
  taken over to stop;
- *one publishing thread* relays text deltas to the fan-out in the order they were
  produced, a tick's worth in one message (``DELTA_TICK_SECONDS``), so a slow Redis never
  blocks the loop and a token-by-token model costs one publish a tick, not one a token;
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
import logging
import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from django.core.signals import setting_changed
from django.db import DatabaseError, InterfaceError, connection
from django.dispatch import receiver

from poppy_django.conf import poppy_settings
from poppy_django.engine import leases
from poppy_django.observe import heartbeats

logger = logging.getLogger("poppy_django.engine")

P = ParamSpec("P")
T = TypeVar("T")

#: Text deltas waiting for the publishing thread before new ones are dropped (deltas are
#: never stored: a reader that misses one gets the whole message when it is committed).
MAX_PENDING_DELTAS = 10_000
#: How long the publishing thread gathers text deltas before sending them in one go: the
#: most a delta waits, traded for one fan-out message a tick instead of one a token.
DELTA_TICK_SECONDS = 0.05
#: The same for the desk's browser streams (one django-eventstream event per conversation a
#: desk tick): staff watching a reply being written need no token-by-token pace.
DESK_DELTA_TICK_SECONDS = 0.25

_STOP = object()


class DatabaseThreads:
    """A fixed set of threads for blocking work, each keeping one database connection.

    Not a :class:`~concurrent.futures.ThreadPoolExecutor`: each thread closes its own
    connection when it stops, so a stopped engine leaves no connection open behind it.
    """

    def __init__(self, count: int, name: str) -> None:
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{n}", daemon=True)
            for n in range(count)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        self._jobs.put((future, function, args, kwargs))
        return future

    def stop(self, wait: bool = True) -> None:
        for _ in self._threads:
            self._jobs.put(_STOP)
        if wait:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join()

    def _work(self) -> None:
        try:
            while (job := self._jobs.get()) is not _STOP:
                future, function, args, kwargs = job
                if not future.set_running_or_notify_cancel():
                    continue  # cancelled while queued (its turn timed out)
                try:
                    future.set_result(function(*args, **kwargs))
                except BaseException as error:
                    if isinstance(error, DatabaseError | InterfaceError):
                        connection.close()  # a broken connection is not kept for the next job
                    future.set_exception(error)
        finally:
            connection.close()


class DeltaPublisher:
    """The thread that relays text deltas off the event loop: a tick's worth at a time.

    Pieces given within ``tick`` seconds of the first one waiting go to the conversations'
    readers together, in one call of ``publish`` (one message on the bus, whichever
    conversations they belong to), the consecutive pieces of a message joined into one: a
    token-by-token model costs one Redis ``PUBLISH`` a tick, not one a token, and readers
    still see the text as it streams (at most ``tick`` later). The desk's browser streams
    (``publish_desk``: one django-eventstream event per conversation) get the same pieces
    every ``desk_tick``, so a conversation costs one desk event per desk tick, not one per
    token. :meth:`flush` sends what is waiting at once (a turn about to commit its reply, so
    its deltas go out before it).
    """

    def __init__(
        self,
        publish: Callable[[list[tuple[str, str, str]]], None] | None = None,
        tick: float = DELTA_TICK_SECONDS,
        publish_desk: Callable[[list[tuple[str, str, str]]], None] | None = None,
        desk_tick: float = DESK_DELTA_TICK_SECONDS,
    ) -> None:
        self._publish = publish or _publish_to_readers
        self._publish_desk = publish_desk or (_publish_to_desk if publish is None else None)
        self._tick = tick
        self._desk_tick = desk_tick
        self._pending: list[tuple[str, str, str]] = []
        self._changed = threading.Condition()
        #: Deltas taken (not dropped) and sent so far, and who waits for a count to be sent.
        self._taken = self._sent = 0
        self._flushes: list[tuple[int, Callable[[], None]]] = []
        self._dropped = False
        self._stopping = False
        self._thread = threading.Thread(target=self._work, name="poppy-deltas", daemon=True)
        self._thread.start()

    def publish(self, conversation_id: str, message_id: str, text: str) -> None:
        with self._changed:
            if len(self._pending) >= MAX_PENDING_DELTAS:
                if not self._dropped:
                    logger.warning(
                        "poppy: text deltas are published slower than produced; dropping"
                    )
                self._dropped = True
                return
            self._pending.append((conversation_id, message_id, text))
            self._taken += 1
            if len(self._pending) == 1:
                self._changed.notify()

    def flush(self, done: Callable[[], None]) -> None:
        """Send what is waiting now; call ``done`` once every delta given so far is sent
        (from the publishing thread, or here when nothing is waiting)."""
        with self._changed:
            sent_already = self._sent >= self._taken
            if not sent_already:
                self._flushes.append((self._taken, done))
                self._changed.notify()
        if sent_already:
            done()

    def stop(self, wait: bool = True) -> None:
        with self._changed:
            self._stopping = True
            self._changed.notify()
        if wait:
            self._thread.join(timeout=10)

    def _work(self) -> None:
        desk: list[tuple[str, str, str]] = []
        desk_due = 0.0
        try:
            while True:
                batch, now_please = self._next_batch(desk_due if desk else None)
                if not batch and not desk:
                    return  # stopped, nothing left
                self._send(self._publish, batch)
                if self._publish_desk is not None:
                    if batch and not desk:
                        desk_due = time.monotonic() + self._desk_tick
                    desk += batch
                    if desk and (now_please or time.monotonic() >= desk_due):
                        self._send(self._publish_desk, desk)
                        desk = []
                with self._changed:
                    self._sent += len(batch)
                    self._dropped = False
                    ready = [done for upto, done in self._flushes if upto <= self._sent]
                    self._flushes = [(u, d) for u, d in self._flushes if u > self._sent]
                for done in ready:
                    done()
        finally:
            connection.close()

    @staticmethod
    def _send(
        publish: Callable[[list[tuple[str, str, str]]], None], deltas: list[tuple[str, str, str]]
    ) -> None:
        if not deltas:
            return
        try:
            publish(coalesced(deltas))
        except Exception:  # publishing never fails a turn
            logger.warning("poppy: could not publish text deltas", exc_info=True)

    def _next_batch(self, desk_due: float | None) -> tuple[list[tuple[str, str, str]], bool]:
        """Wait for a delta (or the desk's tick), then a tick for more unless a flush or
        stop asks for them now: (the deltas, whether everything is to be sent now); nothing
        once stopped with nothing left."""

        def ready() -> bool:
            return bool(self._pending) or self._stopping

        with self._changed:
            if desk_due is None:
                self._changed.wait_for(ready)
            else:
                self._changed.wait_for(ready, max(0.0, desk_due - time.monotonic()))
            if self._pending and not self._flushes and not self._stopping:
                self._changed.wait_for(lambda: bool(self._flushes) or self._stopping, self._tick)
            batch, self._pending = self._pending, []
            return batch, bool(self._flushes) or self._stopping


def coalesced(deltas: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """One delta per message, its pieces joined in order, the messages in order of their
    first piece (pieces of different messages are independent)."""
    joined: dict[tuple[str, str], list[str]] = {}
    for conversation_id, message_id, text in deltas:
        joined.setdefault((conversation_id, message_id), []).append(text)
    return [(c, m, "".join(pieces)) for (c, m), pieces in joined.items()]


def _publish_to_readers(deltas: list[tuple[str, str, str]]) -> None:
    from poppy_django.fanout import publishing

    publishing.publish_deltas_to_readers(deltas)


def _publish_to_desk(deltas: list[tuple[str, str, str]]) -> None:
    from poppy_django.fanout import publishing

    publishing.publish_deltas_to_desk(deltas)


class Heartbeat:
    """One thread renewing, in one statement, every lease this process holds."""

    def __init__(self) -> None:
        self._holders: dict[str, leases.Holder] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name="poppy-heartbeat", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def holding(self, holder: leases.Holder) -> Iterator[leases.Holder]:
        """Renew ``holder``'s leases until the block ends."""
        self.hold(holder)
        try:
            yield holder
        finally:
            self.drop(holder)

    def hold(self, holder: leases.Holder) -> None:
        """Renew ``holder``'s leases from now on (from any thread: a turn's first database
        job, right after it took the lease), until :meth:`drop`."""
        with self._lock:
            self._holders[holder.owner] = holder

    def drop(self, holder: leases.Holder) -> None:
        with self._lock:
            self._holders.pop(holder.owner, None)

    def held(self) -> list[leases.Holder]:
        with self._lock:
            return list(self._holders.values())

    def beat(self) -> None:
        """Renew them all now; mark those whose conversation lease was taken over."""
        holders = self.held()
        if not holders:
            return
        renewed = leases.renew_all([holder.owner for holder in holders])
        for holder in holders:
            if holder.owner not in renewed:
                holder.mark_lost()

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        if wait:
            self._thread.join(timeout=10)

    def _work(self) -> None:
        heartbeats.beat()
        try:
            while not self._stop.wait(poppy_settings.HEARTBEAT_SECONDS):
                heartbeats.beat()  # the worker probe's sign of life, whatever the database says
                try:
                    self.beat()
                except Exception:
                    # The database may be away: the next beat tries again (a lease lasts
                    # several beats); a broken connection is not kept.
                    logger.warning("poppy: the heartbeat failed", exc_info=True)
                    connection.close()
        finally:
            connection.close()


@dataclass
class Counters:
    """What the engine has in flight now, and the most it had at once since it started."""

    in_flight: int = 0
    most_in_flight: int = 0
    started: int = 0


class Engine:
    """This process's loop, threads and bound on turns in flight (see the module's text)."""

    def __init__(self, *, turns_in_flight: int, threads: int) -> None:
        self.pid = os.getpid()
        self.capacity = turns_in_flight
        self.loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(
            target=self._run_loop, name="poppy-engine", daemon=True
        )
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
        return asyncio.run_coroutine_threadsafe(self._turns(conversation_id, owner), self.loop)

    async def _turns(self, conversation_id: str, owner: str | None) -> None:
        from poppy_django.engine.turns import answer

        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await answer(conversation_id, owner)
        except Exception:
            logger.exception("poppy: turns of %s failed", conversation_id)
        finally:
            self._tasks.discard(task)
            with self._places:
                self.counters.in_flight -= 1
            self.give_back()

    # -- the loop's helpers -----------------------------------------------------------------

    async def run_sync(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run blocking (ORM, sync tool) work on a database thread and await its result."""
        return await asyncio.wrap_future(self.database.submit(function, *args, **kwargs))

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
                turns_in_flight=poppy_settings.TURNS_IN_FLIGHT,
                threads=poppy_settings.EXECUTOR_THREADS,
            )
        return _engine


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
