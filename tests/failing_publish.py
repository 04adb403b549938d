"""A write's versioned publish that fails once, as a Redis error at that very moment would,
and the fan-out's retries of it held until the test lets them go.

The fault is injected at redis-py's public client API (``Redis.evalsha``, which a registered
script calls), for the one call that carries the bus's channel: the write's ``SET`` of its
version and ``PUBLISH`` of its nudge. Every other call, the retries' included, reaches Redis.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from poppy_django.fanout import bus
from poppy_django.fanout.retrying import Backoff


class PublishFault:
    """Fails the next versioned publish; :attr:`failed` counts the ones it failed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.armed = False
        self.failed = 0
        evalsha = redis.Redis.evalsha

        def flaky(client: redis.Redis, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
            if self.armed and bus.redis_channel() in keys_and_args:
                self.armed = False
                self.failed += 1
                raise redis.ConnectionError("Connection reset by peer (the test's fault)")
            return evalsha(client, sha, numkeys, *keys_and_args)

        monkeypatch.setattr(redis.Redis, "evalsha", flaky)

    def arm(self) -> None:
        self.armed = True


class HeldRetries:
    """The fan-out's retry rounds wait until :meth:`release` (bounded: a test that forgets
    does not hold the thread for good), then go without pauses."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def backoff(self) -> Backoff:
        held = self

        class Held(Backoff):
            def after(self, _held: float) -> float:
                held.released.wait(20)
                return 0.0

        return Held()

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def publish_fault(monkeypatch: pytest.MonkeyPatch) -> PublishFault:
    return PublishFault(monkeypatch)


@pytest.fixture
def held_retries(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldRetries]:
    retries = HeldRetries()
    monkeypatch.setattr(bus, "mending_backoff", retries.backoff)
    yield retries
    retries.release()


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries without the production pauses (the first is half a second)."""
    monkeypatch.setattr(bus, "mending_backoff", lambda: Backoff(first=0.01, most=0.05))
