"""A write's versioned publish, or a pruning's out-of-date mark, that fails once, as a Redis
error at that very moment would, and the fan-out's retries of it held until the test lets
them go; or a versioned publish that lands late, after a later write's (its commit callback
ran late: another thread, another process).

The fault is injected at redis-py's public client API, for one call: ``Redis.evalsha`` (which
a registered script calls) carrying the bus's channel, the write's ``SET`` of its version and
``PUBLISH`` of its nudge; or ``Redis.set`` of the out-of-date mark (``versions.forget_version``,
after a pruning, a deletion or an account's binding). Every other call, the retries'
included, reaches Redis.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from poppy_django.fanout import bus, versions
from poppy_django.fanout.retrying import Backoff


class PublishFault:
    """Fails the next versioned publish (:meth:`arm`) or out-of-date mark (:meth:`arm_mark`),
    or holds the next versioned publish until :meth:`land` (:meth:`delay`); :attr:`failed`
    counts the calls it failed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.armed = False
        self.mark_armed = False
        self.failed = 0
        self.delaying = False
        #: Set once the delayed publish is reached (and held); :meth:`land` lets it go.
        self.delayed = threading.Event()
        self.landing = threading.Event()
        evalsha = redis.Redis.evalsha
        set_ = redis.Redis.set

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

        def flaky_set(client: redis.Redis, name: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
            if self.mark_armed and value == versions.FORGOTTEN:
                self.mark_armed = False
                self.failed += 1
                raise redis.TimeoutError("Timeout reading from socket (the test's fault)")
            return set_(client, name, value, *args, **kwargs)

        monkeypatch.setattr(redis.Redis, "evalsha", flaky)
        monkeypatch.setattr(redis.Redis, "set", flaky_set)

    def arm(self) -> None:
        self.armed = True

    def arm_mark(self) -> None:
        self.mark_armed = True

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
    monkeypatch.setattr(versions, "mending_backoff", retries.backoff)
    yield retries
    retries.release()


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries without the production pauses (the first is half a second)."""
    monkeypatch.setattr(versions, "mending_backoff", lambda: Backoff(first=0.01, most=0.05))
