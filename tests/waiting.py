"""Waiting for something to happen, instead of sleeping for a guessed time: the suite's one
poll helper, and its one hand-moved clock (time that passes when the test says so)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(
    condition: Callable[[], T],
    *,
    timeout: float = 20.0,
    what: str | Callable[[], str] = "",
) -> T:
    """``condition()``'s first truthy value, polled; fail naming ``what`` after ``timeout`` s
    (a generous bound for a busy machine, never a timing assertion). ``what`` may be a
    function, called only on failure (a log to show)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"timed out waiting for {said or condition}")
        time.sleep(0.02)


class Clock:
    """A clock the test moves: what a cache's age, a cooldown or a rate window is measured
    with, passed to (or put in place of) the code's own clock, so a test makes the time pass
    with :meth:`advance` instead of sleeping it out."""

    def __init__(self, now: float | None = None) -> None:
        self.now = time.time() if now is None else now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def until(condition: Callable[[], object], *, timeout: float = 20.0, what: str = "") -> None:
    """:func:`eventually` on an event loop: polls without blocking it (``condition`` may
    return an awaitable, awaited for its value)."""
    import asyncio
    import inspect

    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        await asyncio.sleep(0.02)
