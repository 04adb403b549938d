"""The engine's database threads: a fixed set for blocking work, never a thread per turn.

Everything synchronous a turn does (the ORM work of claims and commits, sync tools, actions,
approvals) runs here, so the connections its turns use are bounded per process
(``POPPY["EXECUTOR_THREADS"]``), never one per turn. A thread keeps a persistent
connection between jobs (``CONN_MAX_AGE``); a connection of Django's psycopg pool
(``OPTIONS["pool"]``) goes back to the process's pool once the thread has no job waiting,
so the threads, the heartbeat and the sweep share the process's bounded connections and none
holds one idle; back-to-back jobs (a busy worker's claims and commits) share one checkout.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from django.db import DatabaseError, InterfaceError, connection

from poppy_django.threads import give_back_pooled_connections

T = TypeVar("T")

_STOP = object()


class DatabaseThreads:
    """A fixed set of threads for blocking work, each with at most one database connection.

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
                    if self._jobs.empty():
                        # Nothing more to do: the pooled connection goes back. A thread with
                        # another job waiting keeps it for that job, as one longer job would:
                        # no checkout, no check's round trip, no return between the two.
                        give_back_pooled_connections()
        finally:
            connection.close()
