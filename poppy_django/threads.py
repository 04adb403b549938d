"""Threads for async views: blocking (ORM) work off the event loop, and no idle request thread.

Django's ASGI handler runs each request in an asgiref ``ThreadSensitiveContext``; its first
thread-sensitive call (Django's own ``request_started`` receivers) starts a worker thread,
which the context's exit joins from yet another thread: two threads started per request,
about as much CPU as a bare async view costs. :func:`lent_request_thread` (entered by
``poppy_django.asgi.PoppyBodyLimit`` for the endpoint's paths) runs the request in a context
of asgiref's public ``ThreadSensitiveContext(executor=...)`` form with a single-thread
executor lent from a pool: one thread per request while it runs, as Django's, but started
once and kept for the next requests. Django's handler, entered inside, uses that context.

A waiting reader holds no thread: :func:`release_request_thread` gives the request's
thread back while it waits — the one place that reaches past asgiref's public API. asgiref
offers no public way to end a context's thread early, so this takes the context's executor
out of ``SyncToAsync.context_to_thread_executor`` (found through
``SyncToAsync.thread_sensitive_context``), returning a lent one to the pool and shutting
down any other (asgiref's range is pinned in ``pyproject.toml``; ``tests/stream/test_threads.py``
fails loudly when the behaviour changes). A later thread-sensitive call of the same request
(``request_finished``) starts a new thread for its moment, which ends with the request.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import ParamSpec, TypeVar

from asgiref.sync import SyncToAsync, ThreadSensitiveContext, sync_to_async
from django.db import close_old_connections, connections

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


@asynccontextmanager
async def lent_request_thread(threads: RequestThreads | None = None) -> AsyncIterator[None]:
    """Run the block's thread-sensitive calls (the request's) on a thread lent for it (from
    ``threads``, by default the endpoint's :data:`request_threads`)."""
    threads = threads or request_threads
    executor, loan = threads.lend()
    try:
        async with ThreadSensitiveContext(executor=executor):
            yield
    finally:
        threads.give_back(executor, loan)  # unless given back while it waited


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
    """Give back the thread Django's ASGI handler keeps for this request while it waits."""
    try:
        context = SyncToAsync.thread_sensitive_context.get(None)
        executors = SyncToAsync.context_to_thread_executor
    except AttributeError:  # pragma: no cover - an asgiref outside the pinned range
        logger.warning("poppy: this asgiref cannot release request threads; readers hold one")
        return
    executor = executors.pop(context, None) if context is not None else None
    if executor is not None and not request_threads.give_back(executor):
        executor.shutdown(wait=False)
