"""Threads for async views: blocking (ORM) work off the event loop, and no idle request thread.

Django's ASGI handler runs each request in an asgiref ``ThreadSensitiveContext``; its first
thread-sensitive call (Django's own ``request_started`` receivers) starts a worker thread,
which the context's exit joins from yet another thread: two threads started per request,
about as much CPU as a bare async view costs. :func:`lent_request_thread` (entered by
``poppy_django.asgi.PoppyBodyLimit`` for the endpoint's paths) runs the request in a context
of asgiref's public ``ThreadSensitiveContext(executor=...)`` form with a
:class:`RequestExecutor`: a single-thread executor lent from a pool at the request's first
thread-sensitive call (one thread per request while it runs, as Django's, but started once
and kept for the next requests), and on the endpoint none at all for Django's request
signals when their receivers may run on the event loop. Django's handler, entered inside,
uses that context.

A waiting reader holds no thread: :func:`release_request_thread` gives the request's lent
thread back while it waits, unless a call still runs on it (a sync-only middleware waits
there for the answer). For a request Django's handler runs in a context of its own (an
application without ``PoppyBodyLimit``) it reaches past asgiref's public API, which offers
no way to end a context's thread early: it takes the context's executor out of
``SyncToAsync.context_to_thread_executor`` (found through
``SyncToAsync.thread_sensitive_context``) and shuts it down (asgiref's range is pinned in
``pyproject.toml``; ``tests/stream/test_threads.py`` fails loudly when the behaviour
changes); a later thread-sensitive call of that request starts a new thread for its moment.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import SyncToAsync, ThreadSensitiveContext, sync_to_async
from django.core.cache import close_caches
from django.core.handlers.base import reset_urlconf
from django.core.signals import request_started
from django.db import close_old_connections, connections, reset_queries
from django.dispatch import Signal

logger = logging.getLogger("poppy_django.threads")

P = ParamSpec("P")
T = TypeVar("T")


#: Set while a request is answered through Django's sync handler (a WSGI server, Django's
#: test ``Client``): the request's own thread waits for the answer anyway.
_on_request_thread: ContextVar[bool] = ContextVar("poppy_on_request_thread", default=False)


@contextmanager
def on_request_thread() -> Iterator[None]:
    """Run the block's :func:`in_thread` work on the calling (request's) thread.

    Django's sync views use the request thread's database connection: so do ours when
    Django's sync handler calls them, which keeps a ``TestCase``'s transaction around what
    a test's request writes (and SQLite's single writer uncontested).
    """
    token = _on_request_thread.set(True)
    try:
        yield
    finally:
        _on_request_thread.reset(token)


async def in_thread(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run blocking (ORM) work off the event loop, returning its connection when done (on
    the request's own thread and connection under :func:`on_request_thread`)."""
    if _on_request_thread.get():
        return await sync_to_async(function, thread_sensitive=True)(*args, **kwargs)

    def call() -> T:
        try:
            return function(*args, **kwargs)
        finally:
            close_old_connections()

    return await sync_to_async(call, thread_sensitive=False)()


def give_back_pooled_connections() -> None:
    """Give this thread's pooled database connections back to their pool (Django's psycopg
    pool, ``OPTIONS["pool"]``): a thread that lives for many jobs (the engine's database
    threads, its heartbeat) must not hold one of the process's bounded connections between
    them. A connection of no pool is left as ``CONN_MAX_AGE`` says, as is one inside a
    transaction."""
    for wrapper in connections.all(initialized_only=True):
        pooled = getattr(wrapper, "pool", None) is not None
        if pooled and wrapper.connection is not None and not wrapper.in_atomic_block:
            wrapper.close()


class RequestThreads:
    """Single-thread executors lent to requests, one to each while it runs; up to ``keep``
    idle ones are kept for the next requests, any more are shut down when given back."""

    def __init__(self, keep: int = 64) -> None:
        self.keep = keep
        self._idle: list[ThreadPoolExecutor] = []
        #: Each lent executor's current loan: a request that gave its executor back early
        #: (a waiting reader) must not give it back again once another request holds it.
        self._loans: dict[Executor, object] = {}
        self._lock = threading.Lock()  # requests may run on several loops (test clients)

    def lend(self) -> tuple[ThreadPoolExecutor, object]:
        """An executor for one request, and its loan (for :meth:`give_back`)."""
        with self._lock:
            executor = self._idle.pop() if self._idle else None
            if executor is None:
                executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="poppy-request")
            loan = self._loans[executor] = object()
            return executor, loan

    def give_back(self, executor: Executor, loan: object | None = None) -> bool:
        """End the executor's loan (``loan``: only if it is still that one); False when it
        is not lent, or lent again since. Its queued work still runs first: the next
        request's calls wait behind it."""
        with self._lock:
            if executor not in self._loans or loan not in (None, self._loans[executor]):
                return False
            del self._loans[executor]
            if len(self._idle) < self.keep:
                assert isinstance(executor, ThreadPoolExecutor)
                self._idle.append(executor)
                return True
        executor.shutdown(wait=False)
        return True

    def idle(self) -> int:
        with self._lock:
            return len(self._idle)


#: This process's request threads.
request_threads = RequestThreads()


#: Receivers of ``request_started`` and ``request_finished`` that may run on the event loop
#: (:class:`RequestExecutor`): Django's own, and those registered with :func:`runs_on_loop`.
#: Those acting on the calling thread's database connections run again on a request's thread
#: before its first job there (:data:`_THREAD_BOUND`).
_LOOP_SAFE: set[Callable[..., Any]] = {
    reset_queries,
    close_old_connections,
    close_caches,
    reset_urlconf,
}
#: Of those, the ones whose effect is the calling thread's (its database connections).
_THREAD_BOUND = (close_old_connections, reset_queries)


def runs_on_loop(receiver: Callable[..., Any]) -> None:
    """Declare a sync receiver of the request signals safe to run on the event loop (quick,
    no database, no blocking I/O): an endpoint request whose receivers all are runs them there."""
    _LOOP_SAFE.add(receiver)


def _loop_safe_receivers(signal: Signal, sender: type) -> list[Callable[..., Any]] | None:
    """The signal's sync receivers for ``sender``, each as connected (unwrapped), if every
    one may run on the loop, else None.

    Django offers no public way to list a signal's receivers: this reads them as
    ``Signal.asend`` does (``_live_receivers``, the same call; Django's range is pinned in
    ``pyproject.toml``, ``tests/stream/test_request_signals.py`` fails loudly when it changes).
    What that call returns may be wrapped: Sentry's Django integration (on by default once
    ``sentry_sdk.init`` runs in a Django project, docs/operations.md) patches it to return
    each receiver in a new ``functools.wraps`` wrapper that times it in a span. A receiver
    is judged by the one it wraps (``__wrapped__``), as a wrapper made that way declares
    itself the same callable; judged as is, no receiver would ever be loop-safe there.
    """
    try:
        live = signal._live_receivers(sender)
    except (AttributeError, TypeError):  # pragma: no cover - another Django
        return None
    if not (isinstance(live, tuple) and len(live) == 2):  # pragma: no cover - another Django
        return None
    try:
        connected = [inspect.unwrap(receiver) for receiver in live[0]]
        safe = all(receiver in _LOOP_SAFE for receiver in connected)
    except (TypeError, ValueError):  # unhashable, or a cycle of wrappers: not one declared
        return None
    return connected if safe else None


class RequestExecutor(Executor):
    """The thread-sensitive executor of one request (asgiref's public
    ``ThreadSensitiveContext(executor=...)``): a thread lent from a pool at the request's first
    thread-sensitive call, and none at all for a request whose only such calls are Django's
    request signals with loop-safe receivers.

    Django's ASGI handler sends ``request_started`` (its sync receivers in one thread-sensitive
    call) once the body is in, and ``request_finished`` in ``response.close()`` (one more) once
    the response is sent: two thread hops for a request that may need no thread at all (an
    endpoint read answered on the loop). ``poppy_django.asgi.PoppyBodyLimit`` tells this
    executor when the next call is one of those (:meth:`signal_next`); it then runs on the
    event loop if every sync receiver of the signal is loop-safe (Django's own, or declared
    with :func:`runs_on_loop`) — and for ``request_finished``, only if no call of the request
    used a thread (one that did has its connections closed there, as Django does). A
    project's own sync receiver keeps its thread: both signals then run on it as before.
    Django's ``close_old_connections`` and ``reset_queries`` act on the calling thread's
    connections: when ``request_started`` ran on the loop, they run again on each thread
    lent to the request, before its first job there (the thread that will use a connection).

    ``PoppyBodyLimit`` asks this of the endpoint's reads only: with a POST's signals on the
    loop too, POSTs per second fell by 17-30 % in ``bench/trees.py`` (four runs; none with
    reads alone) at the same CPU per POST — a POST's cycle, in a thread, makes several
    round trips, and (our reading) then waits longer for the GIL from a loop that no longer
    pauses at those two hops.
    """

    def __init__(self, threads: RequestThreads, sender: type | None = None) -> None:
        self._threads = threads
        #: The class Django's handler sends the request signals as (None: never on the loop).
        self._sender = sender
        self._lent: ThreadPoolExecutor | None = None
        self._loan: object | None = None
        #: ``request_started``'s thread-bound receivers, when it ran on the loop: each lent
        #: thread's first job runs them first.
        self._before_first: tuple[Callable[..., Any], ...] = ()
        self._fresh = False  # the lent thread has run no job of this request yet
        self._next: Signal | None = None
        self._used = False  # a call of this request ran on a thread
        self._running = 0
        self._lock = threading.Lock()

    def signal_next(self, signal: Signal) -> None:
        """The request's next thread-sensitive call is Django's handler sending ``signal``."""
        if self._sender is not None:
            self._next = signal

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        call = functools.partial(fn, *args, **kwargs)
        signal, self._next = self._next, None
        if signal is not None and not self._used and not _connected_here():
            receivers = _loop_safe_receivers(signal, self._sender)  # type: ignore[arg-type]
            if receivers is not None and (receivers or signal is not request_started):
                if signal is request_started:
                    self._before_first = tuple(r for r in _THREAD_BOUND if r in receivers)
                return _run_here(call)
        return self._on_thread(call, started=signal is request_started)

    def _on_thread(self, call: Callable[[], T], *, started: bool) -> Future[T]:
        with self._lock:
            if self._lent is None:
                self._lent, self._loan = self._threads.lend()
                self._fresh = not started  # request_started's own call needs nothing before
            before = self._before_first if self._fresh else ()
            self._fresh = False
            self._used = True
            self._running += 1
            lent = self._lent

        def job() -> T:
            try:
                for receiver in before:
                    receiver(signal=request_started, sender=self._sender)
                return call()
            finally:
                with self._lock:
                    self._running -= 1

        return lent.submit(job)

    def release(self) -> None:
        """Give the lent thread back to the pool while the request waits, unless a call still
        runs on it (a sync-only middleware waiting there for the rest of the chain holds it
        until the answer passes back through it); a later call is lent one again."""
        with self._lock:
            if self._lent is None or self._running:
                return
            lent, loan, self._lent = self._lent, self._loan, None
        self._threads.give_back(lent, loan)

    def finish(self) -> None:
        """The request ended: its thread back to the pool (its queued work still runs first)."""
        with self._lock:
            lent, loan, self._lent = self._lent, self._loan, None
        if lent is not None:
            self._threads.give_back(lent, loan)


def _connected_here() -> bool:
    """Whether the loop holds an open database connection in this context, which it never
    should (Django refuses the ORM there unless ``DJANGO_ALLOW_ASYNC_UNSAFE`` is set):
    Django's ``close_old_connections`` would then check it there, a blocking call."""
    return any(wrapper.connection is not None for wrapper in connections.all(initialized_only=True))


def _run_here(call: Callable[[], T]) -> Future[T]:
    """``call`` run now, on the calling thread (the event loop's), as a done future."""
    future: Future[T] = Future()
    try:
        future.set_result(call())
    except BaseException as exc:  # as a thread's job would: raised where it is awaited
        future.set_exception(exc)
    return future


#: The executor of the request running in this context (:func:`lent_request_thread`).
_request_executor: ContextVar[RequestExecutor | None] = ContextVar(
    "poppy_request_executor", default=None
)


@asynccontextmanager
async def lent_request_thread(
    threads: RequestThreads | None = None, *, sender: type | None = None
) -> AsyncIterator[RequestExecutor]:
    """Run the block's thread-sensitive calls (the request's) on a thread lent for it (from
    ``threads``, by default the endpoint's :data:`request_threads`) when it makes one;
    ``sender``: the class of Django's handler inside, whose request signals may then run on
    the loop (:class:`RequestExecutor`)."""
    executor = RequestExecutor(threads or request_threads, sender)
    token = _request_executor.set(executor)
    try:
        async with ThreadSensitiveContext(executor=executor):
            yield executor
    finally:
        _request_executor.reset(token)
        executor.finish()


class ChannelThreads:
    """At most ``most`` request threads at once for the other channels' requests, in this
    process: without a connection pool each keeps its database connection for the next
    request (``CONN_MAX_AGE``), so the connections these requests hold are bounded by
    configuration, never by how many clients arrive at once; with Django's pool (which bounds
    every route's) they give it back at the end of each request and only bound the requests
    at once. A request beyond the bound waits for a thread, holding none."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.threads = RequestThreads(keep=most)
        self._slots: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
        self._lock = threading.Lock()

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        with self._lock:  # one semaphore per event loop (a server runs one)
            found = self._slots.get(loop)
            if found is None:
                found = self._slots[loop] = asyncio.Semaphore(self.most)
            return found

    @asynccontextmanager
    async def lent(self) -> AsyncIterator[None]:
        async with self._semaphore(), lent_request_thread(self.threads):
            yield


_channel_threads: ChannelThreads | None = None


def channel_threads(most: int) -> ChannelThreads:
    """This process's :class:`ChannelThreads` (made at the first channel request)."""
    global _channel_threads
    if _channel_threads is None or _channel_threads.most != most:
        _channel_threads = ChannelThreads(most)
    return _channel_threads


def release_request_thread() -> None:
    """Give back the thread this request holds while it waits (none held: nothing to do)."""
    mine = _request_executor.get()
    if mine is not None:
        mine.release()
        return
    # A request Django's handler runs in a context of its own (an application without
    # PoppyBodyLimit): its executor, taken out of asgiref's table, ends.
    try:
        context = SyncToAsync.thread_sensitive_context.get(None)
        executors = SyncToAsync.context_to_thread_executor
    except AttributeError:  # pragma: no cover - an asgiref outside the pinned range
        logger.warning("poppy: this asgiref cannot release request threads; readers hold one")
        return
    executor = executors.pop(context, None) if context is not None else None
    if executor is not None:
        executor.shutdown(wait=False)
