"""The line between a turn that is still live and one that was abandoned at its time limit.

A model that hangs cannot be stopped from outside its thread, so a turn past its limit is
*abandoned*: the worker writes the failed-turn message and moves on, and everything the
abandoned run tries afterwards is refused here — text pieces are not relayed, tools are
not called, and an action's transaction does not commit. Each of those holds the guard
while it writes, so abandoning waits for a write in progress and never races it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from poppy_django.agent.model_api import TurnInterrupted


class TurnAbandoned(TurnInterrupted):
    """The turn passed its time limit: nothing it does from now on is written."""


class TurnGuard:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._abandoned = False

    @property
    def abandoned(self) -> bool:
        return self._abandoned

    def abandon(self) -> None:
        """From now on every write of the turn is refused (waits for one in progress)."""
        with self._lock:
            self._abandoned = True

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the guard for a short write; refused once the turn is abandoned."""
        with self._lock:
            if self._abandoned:
                raise TurnAbandoned("the turn passed its time limit")
            yield

    @contextmanager
    def committing(self) -> Iterator[Callable[[], None]]:
        """For a transaction: call the yielded check right before it commits.

        The check takes the guard (refusing if abandoned, which rolls the transaction back)
        and the guard stays held until this block ends — after the commit, when this block
        encloses the ``atomic()`` block.
        """
        held = False

        def check() -> None:
            nonlocal held
            self._lock.acquire()
            held = True
            if self._abandoned:
                raise TurnAbandoned("the turn passed its time limit")

        try:
            yield check
        finally:
            if held:
                self._lock.release()
