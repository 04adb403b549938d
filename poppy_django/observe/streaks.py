"""A failing dependency logged once a streak, not at every try.

A loop that retries (the recovery sweep every ``SWEEP_SECONDS``, the heartbeat every
``HEARTBEAT_SECONDS``) or a stream of requests meeting the same outage would otherwise write a
line, with its traceback, each time: an idle worker with PostgreSQL down wrote 1,802 lines in
68 s. A :class:`Streak` logs the first failure as a warning with its traceback and its cause
(:func:`~poppy_django.observe.redaction.describe_failure`: a connection-level error keeps the
server's words), a cause not yet seen in the streak as a new warning, a cause seen already only
once every ``REPEAT_SECONDS`` (with how many times since), and the first success after it
once, at INFO, with how long it lasted. A streak whose cause flaps (PostgreSQL down: "Connection
refused" from one try, the pool's "couldn't get a connection" from the next) is one streak with
two causes, not a warning and a traceback at every try.
"""

from __future__ import annotations

import logging
import threading
import time

from poppy_django.observe.redaction import describe_failure

#: Seconds between two warnings while the same failure lasts.
REPEAT_SECONDS = 60.0


class Streak:
    """The failures of one thing a process does again and again (``what``: "the recovery
    sweep"), logged on ``logger`` once a streak."""

    def __init__(self, logger: logging.Logger, what: str, repeat: float = REPEAT_SECONDS) -> None:
        self.logger = logger
        self.what = what
        self.repeat = repeat
        self._lock = threading.Lock()
        self._cause: str | None = None
        self._causes: set[str] = set()
        self._began = 0.0
        self._told = 0.0
        self._since_told = 0
        self._failures = 0

    @property
    def failing(self) -> bool:
        with self._lock:
            return self._cause is not None

    def failed(self, exc: BaseException, hint: str | None = None) -> None:
        """One more failure: logged if it begins a streak, brings a cause not seen in it yet,
        or the last line about it is older than ``repeat`` seconds (``hint``: the fix, said
        with it)."""
        cause = describe_failure(exc) + (f" ({hint})" if hint else "")
        now = time.monotonic()
        with self._lock:
            self._failures += 1
            self._since_told += 1
            if self._cause is None:
                self._began = now
            new = cause not in self._causes
            due = now - self._told >= self.repeat
            if not (new or due):
                return
            self._cause, self._told = cause, now
            self._causes.add(cause)
            repeated, self._since_told = self._since_told - 1, 0
            lasted = now - self._began
        if new:
            self.logger.warning("poppy: %s failed: %s", self.what, cause, exc_info=exc)
        else:
            self.logger.warning(
                "poppy: %s still failing after %.0f s (%d more times): %s",
                self.what,
                lasted,
                repeated,
                cause,
            )

    def succeeded(self) -> None:
        """It worked: the end of a streak is logged once."""
        with self._lock:
            if self._cause is None:
                return
            lasted, failures = time.monotonic() - self._began, self._failures
            self._cause, self._failures, self._since_told, self._told = None, 0, 0, 0.0
            self._causes.clear()
        self.logger.info(
            "poppy: %s works again, after %.0f s and %d failures", self.what, lasted, failures
        )


class Streaks:
    """One :class:`Streak` per dependency (``what`` has a ``{}`` for its name): requests
    meeting an outage, logged once a streak per dependency. A failing request never learns
    that the dependency came back: whoever does says so (:meth:`succeeded`; the database's
    new connections, through Django's ``connection_created``), else only the repeats are
    bounded (one line per ``repeat``)."""

    def __init__(self, logger: logging.Logger, what: str, repeat: float = REPEAT_SECONDS) -> None:
        self.logger = logger
        self.what = what
        self.repeat = repeat
        self._lock = threading.Lock()
        self._streaks: dict[str, Streak] = {}

    def failed(self, dependency: str, exc: BaseException, hint: str | None = None) -> None:
        with self._lock:
            streak = self._streaks.get(dependency)
            if streak is None:
                streak = Streak(self.logger, self.what.format(dependency), self.repeat)
                self._streaks[dependency] = streak
        streak.failed(exc, hint)

    def succeeded(self, dependency: str) -> None:
        """``dependency`` answers again: its streak, if any, ends (said once)."""
        streak = self._streaks.get(dependency)  # a dict read: called at every connection
        if streak is not None and streak.failing:
            streak.succeeded()
