"""Redis away while a process holds its subscriptions (the bus's wake-ups, one per event
loop, and the revocations'): the log says so once a streak with the cause, not at each
reconnection attempt (two warnings and their tracebacks per 8 s per event loop), and one
line when the subscription is confirmed again, with how many attempts failed.

The attempts are counted by the backoff each subscription takes (here: no pause), so a test
drives as many failed attempts as it likes without waiting them out.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import override_settings
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from poppy_django.fanout import bus
from poppy_django.fanout.bus import Inbox
from poppy_django.fanout.retrying import Backoff
from poppy_django.verifier import revocations, sessions
from tests.multiprocess.cluster import free_port
from tests.waiting import eventually, until

#: Failed attempts driven before Redis comes back.
ATTEMPTS = 8


class CountedBackoff(Backoff):
    """No pause between attempts; counts them (one per failed attempt)."""

    def __init__(self) -> None:
        super().__init__(first=0.01, most=0.01)
        self.attempts = 0

    def after(self, held: float) -> float:
        self.attempts += 1
        return super().after(held)


def _redis(port: int | None = None, **extra: Any) -> dict[str, Any]:
    """The test Redis's connection arguments, or a closed port's."""
    url = urlsplit(os.environ.get("POPPY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
    return {
        "host": url.hostname,
        "port": port or url.port or 6379,
        "db": int(url.path.strip("/") or 0),
        "socket_connect_timeout": 2,
        **extra,
    }


def _lines(caplog: pytest.LogCaptureFixture, logger: str) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == logger]


def _failures_told(recovery: str) -> int:
    found = re.search(r" and (\d+) failures$", recovery)
    assert found, recovery
    return int(found.group(1))


def _subscribed_once(redis_kwargs: dict[str, Any]) -> None:
    """One event loop's subscription confirmed, then ended (the loop closes)."""

    async def scenario() -> None:
        inbox = Inbox("poppy-outage-test")
        inbox.open()
        try:
            assert await inbox.receive(timeout=20) == (True, [])  # poked: subscribed
        finally:
            inbox.close()
            for task in list(bus._subscriptions.values()):
                task.cancel()

    with override_settings(EVENTSTREAM_REDIS=redis_kwargs):
        asyncio.run(scenario())


def test_the_bus_subscription_logs_redis_away_once_a_streak(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="poppy_django.fanout")
    _subscribed_once(_redis())  # whatever an earlier test left failing ends before we look
    caplog.clear()
    backoff = CountedBackoff()
    monkeypatch.setattr(bus, "subscription_backoff", lambda: backoff)

    async def scenario() -> tuple[bool, list[Any]]:
        inbox = Inbox("poppy-outage-test")
        # An asyncio client: no retries of its own, each attempt fails at once.
        away = _redis(port=free_port(), retry=AsyncRetry(NoBackoff(), 0))
        with override_settings(EVENTSTREAM_REDIS=away):
            inbox.open()
            await until(lambda: backoff.attempts >= ATTEMPTS, what="failed attempts")
        try:
            with override_settings(EVENTSTREAM_REDIS=_redis()):  # Redis is back
                return await inbox.receive(timeout=20)
        finally:
            inbox.close()
            for task in list(bus._subscriptions.values()):
                task.cancel()

    assert asyncio.run(scenario()) == (True, [])  # subscribed again: the reader re-reads
    lines = _lines(caplog, "poppy_django.fanout")
    assert [level for level, _ in lines] == ["WARNING", "INFO"], lines
    warned, back = lines[0][1], lines[1][1]
    assert warned.startswith(
        "poppy: subscribing to Redis for wake-ups failed: redis.exceptions.ConnectionError"
    ), warned
    assert "Error 111 connecting to" in warned and "nothing is lost" in warned
    assert back.startswith("poppy: subscribing to Redis for wake-ups works again, after ")
    assert _failures_told(back) == backoff.attempts >= ATTEMPTS


def test_the_revocation_subscription_logs_redis_away_once_a_streak(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sync client: no retries of its own, each attempt fails at once.
    here = _redis(retry=Retry(NoBackoff(), 0))
    away = _redis(port=free_port(), retry=Retry(NoBackoff(), 0))
    backoff = CountedBackoff()
    monkeypatch.setattr(revocations, "subscription_backoff", lambda: backoff)

    def subscribed() -> bool:
        return revocations.listening(sessions.forget_sessions)

    caplog.set_level(logging.INFO, logger="poppy_django.auth")
    with override_settings(EVENTSTREAM_REDIS=here):
        # Whatever an earlier test left failing ends before we look.
        eventually(subscribed, what="the revocation subscription to start")
    caplog.clear()
    with override_settings(EVENTSTREAM_REDIS=away):
        assert not subscribed()
        eventually(lambda: backoff.attempts >= ATTEMPTS, what="failed attempts")
    with override_settings(EVENTSTREAM_REDIS=here):  # Redis is back
        eventually(subscribed, what="the revocation subscription to start again")
    lines = _lines(caplog, "poppy_django.auth")
    assert [level for level, _ in lines] == ["WARNING", "INFO"], lines
    warned, back = lines[0][1], lines[1][1]
    assert warned.startswith(
        "poppy: subscribing to Redis for revocations failed: redis.exceptions.ConnectionError"
    ), warned
    assert "Connection refused" in warned and "each request reads the cache" in warned
    assert back.startswith("poppy: subscribing to Redis for revocations works again, after ")
    # The stopped listener's last attempt, if under way, is its successor's to tell.
    assert _failures_told(back) >= ATTEMPTS
