"""Dispatches that wait on a broker, made after the answer by one background thread a process.

A message's turn is dispatched once its write commits. With Celery that is a publish to the
broker: a round trip and about 0.3 ms of kombu's CPU on the request's thread before its 202,
and up to ``CELERY_BROKER_CONNECTION_TIMEOUT`` with the broker away. Neither is needed for
the acknowledgement: the message is in the event log and its conversation ``working``, so a
dispatch that is late or lost costs no message (a worker's recovery sweep takes the
conversation up within ``LEASE_SECONDS`` + ``SWEEP_SECONDS``). :class:`Handover` takes such
dispatches off the request: the committing thread queues the conversation (with its context:
request id and trace), and this process's ``poppy-handover`` thread makes them in order.

- A conversation queued twice before its dispatch is made is dispatched once: its one turn
  answers every message it finds.
- When a dispatch fails, those queued behind it are failed at once with the same error
  instead of each waiting out the broker's timeout; the next ones are tried again.
- At most :data:`MOST_QUEUED` wait; past that a dispatch fails at once (the sweep answers it).
- At exit the queue is drained for up to :data:`DRAIN_SECONDS`.
"""

from __future__ import annotations

import atexit
import contextvars
import os
import threading
from collections.abc import Callable

#: Dispatches waiting at most; past it a dispatch fails at once (a broker away for long).
MOST_QUEUED = 10_000
#: Seconds the queue is drained for at the process's exit.
DRAIN_SECONDS = 2.0

#: Makes one dispatch and records its outcome; returns the error it recorded, or None.
Dispatch = Callable[[str], BaseException | None]
#: Records a dispatch failed without being tried (the error of the one before it).
Fail = Callable[[str, BaseException], None]


class BacklogFull(RuntimeError):
    """More dispatches wait than :data:`MOST_QUEUED`: the broker has been away too long."""


class Handover:
    """This process's queue of dispatches and the thread that makes them."""

    def __init__(self, dispatch: Dispatch, fail: Fail, *, name: str = "poppy-handover") -> None:
        self._dispatch = dispatch
        self._name = name
        self._fail = fail
        self._queued: dict[str, contextvars.Context] = {}
        self._busy = False
        self._changed = threading.Condition()
        self._started = False
        # A fork (a prefork pool's child) inherits the queue's objects but not its thread.
        os.register_at_fork(after_in_child=self._forked)

    def submit(self, key: str) -> None:
        """Dispatch ``key`` (a conversation's id; the operations' handover: an operation's)
        soon, in the caller's context (its request id, trace)."""
        with self._changed:
            self._ensure_thread()
            if key in self._queued:
                return
            if len(self._queued) >= MOST_QUEUED:
                full = BacklogFull(f"{MOST_QUEUED} dispatches already wait for the broker")
            else:
                self._queued[key] = contextvars.copy_context()
                self._changed.notify_all()
                return
        self._fail(key, full)

    def flush(self, timeout: float) -> bool:
        """Wait until every dispatch submitted so far is made (or failed); False at timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._queued and not self._busy, timeout)

    def _ensure_thread(self) -> None:
        """The thread, started at the first dispatch; the queue drained at exit."""
        if self._started:
            return
        self._started = True
        threading.Thread(target=self._run, name=self._name, daemon=True).start()
        atexit.register(self.flush, DRAIN_SECONDS)

    def _forked(self) -> None:
        """In a forked child: an empty queue, no thread yet (the parent's is not here)."""
        self._queued = {}
        self._busy = False
        self._changed = threading.Condition()
        self._started = False

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._queued))
                batch = list(self._queued.items())
                self._queued.clear()
                self._busy = True
            try:
                self._make(batch)
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    def _make(self, batch: list[tuple[str, contextvars.Context]]) -> None:
        for position, (key, context) in enumerate(batch):
            error = context.run(self._dispatch, key)
            if error is not None:
                for later_id, later_context in batch[position + 1 :]:
                    later_context.run(self._fail, later_id, error)
                return
