"""A write's versioned publish that fails once, as a Redis error at that very moment would,
and the fan-out's retries of it held until the test lets them go; or one that lands late,
after a later write's (its commit callback ran late: another thread, another process).

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
    """Fails the next versioned publish (:meth:`arm`), or holds it until :meth:`land`
    (:meth:`delay`); :attr:`failed` counts the ones it failed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.armed = False
        self.failed = 0
        self.delaying = False
        #: Set once the delayed publish is reached (and held); :meth:`land` lets it go.
        self.delayed = threading.Event()
        self.landing = threading.Event()
        evalsha = redis.Redis.evalsha

        def flaky(client: redis.Redis, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
            if self.armed and bus.redis_channel() in keys_and_args:
                self.armed = False
                self.failed += 1
                raise redis.ConnectionError("Connection reset by peer (the test's fault)")
            if self.delaying and bus.redis_channel() in keys_and_args:
                self.delaying = False
                self.delayed.set()
                self.landing.wait(20)  # bounded: a test that fails first does not hold it
            return evalsha(client, sha, numkeys, *keys_and_args)

        monkeypatch.setattr(redis.Redis, "evalsha", flaky)

    def arm(self) -> None:
        self.armed = True

    def delay(self) -> None:
        self.delaying = True

    def land(self) -> None:
        self.landing.set()


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
def publish_fault(monkeypatch: pytest.MonkeyPatch) -> Iterator[PublishFault]:
    fault = PublishFault(monkeypatch)
    yield fault
    fault.land()


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
