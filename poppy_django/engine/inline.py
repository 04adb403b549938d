"""Turns answered inline, on the calling thread and its database connection (tests).

The process's engine (:mod:`poppy_django.engine.loop`) runs turns on its own loop and
database threads, each with a connection of its own: right for a server, invisible to a
test's transaction (Django's ``TestCase`` rolls back only what its own connection wrote, and
SQLite allows one writer). :func:`answer_inline` runs the same turn code
(:func:`poppy_django.engine.turns.answer`: lease, claim, model, commit) with an engine whose
blocking work comes back to the calling thread, so a test's turn is written, and rolled
back, with the rest of the test. The text deltas the model wrote are kept for the test.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async

from poppy_django.engine import leases
from poppy_django.engine.heartbeat import Heartbeat
from poppy_django.engine.loop import Engine, engine_here
from poppy_django.engine.turns import answer

P = ParamSpec("P")
T = TypeVar("T")


class _NoHeartbeat(Heartbeat):
    """No renewals: an inline turn holds its lease for less than the lease lasts."""

    def __init__(self) -> None:  # no thread: nothing to renew in between
        self._holders: dict[str, leases.Holder] = {}
        self._lock = threading.Lock()

    def stop(self, wait: bool = True) -> None:
        return None


class InlineEngine(Engine):
    """The engine's interface for :func:`poppy_django.engine.turns.answer`, on this thread."""

    def __init__(self) -> None:  # no loop, threads or bound of its own
        self.heartbeat = _NoHeartbeat()
        #: ``(conversation_id, message_id, text)`` for each piece the model wrote.
        self.deltas_written: list[tuple[str, str, str]] = []

    async def run_sync(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Back on the thread that called :func:`answer_inline` (its connection)."""
        return await sync_to_async(function, thread_sensitive=True)(*args, **kwargs)

    def publish_delta(self, conversation_id: str, message_id: str, text: str) -> None:
        self.deltas_written.append((conversation_id, message_id, text))

    async def deltas_sent(self, timeout: float = 1.0) -> None:
        return None


async def answer_inline(conversation_id: str) -> InlineEngine:
    """Answer everything unanswered in the conversation now; returns the engine used (its
    ``deltas_written``). Its blocking work runs on the thread of the caller's thread-sensitive
    work: under ``async_to_sync`` from a test, the test's thread and its connection."""
    engine = InlineEngine()
    with engine_here(engine):
        await answer(engine, conversation_id)
    return engine
