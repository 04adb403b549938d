"""What Redis's repeated users share: who hears of each attempt's outcome, and the pause
before the next attempt.

Publishing, the bus's subscriptions and the revocations' subscription try Redis again and
again; while it is away, a warning with a traceback at every try flooded the log. Each tells
its outcomes to a :class:`Failures` instead (a streak from ``poppy_django.observe``, given by
the app's ``ready()``: the fan-out sits below observe), which logs once a streak.
"""

from __future__ import annotations

from typing import Protocol

#: Reconnection backoff of a subscription, in seconds.
RETRY_FIRST, RETRY_MAX = 0.5, 5.0


class Failures(Protocol):
    """Told of each attempt's outcome: a failure (with the fix, ``hint``), or a success."""

    def failed(self, exc: BaseException, hint: str | None = None) -> None: ...

    def succeeded(self) -> None: ...


class Backoff:
    """The pause before a subscription's next attempt: doubling from ``first`` to ``most``,
    and ``first`` again after an attempt that held a while (a Redis restart long after the
    last one is not punished for it). One per subscription; a test gives one that counts the
    attempts and does not make them wait."""

    def __init__(self, first: float = RETRY_FIRST, most: float = RETRY_MAX) -> None:
        self.first = first
        self.most = most
        self._next = first

    def after(self, held: float) -> float:
        """The pause after an attempt that held ``held`` seconds before it failed."""
        if held > 10 * self.most:
            self._next = self.first
        pause, self._next = self._next, min(self._next * 2, self.most)
        return pause
