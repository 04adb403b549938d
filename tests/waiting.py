"""Waiting for something to happen, instead of sleeping for a guessed time."""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(condition: Callable[[], object], *, timeout: float = 20.0, what: str = "") -> None:
    """Return as soon as ``condition()`` holds; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.02)
