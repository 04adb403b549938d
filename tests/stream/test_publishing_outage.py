"""Redis away while the app publishes: its wake-ups and events are lost (readers re-read the
database), and the log says so once a streak, not at every message: one warning when the
failures start, one line when a publish goes through again."""

from __future__ import annotations

import logging
import os
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import override_settings
from redis.backoff import NoBackoff
from redis.retry import Retry

from poppy_django.fanout import publishing
from tests.multiprocess.cluster import free_port

CONVERSATION = "cnv_publishing_outage"


def _redis(port: int | None = None) -> dict[str, Any]:
    """The test Redis's connection arguments, or a closed port's (no retry: fail at once)."""
    url = urlsplit(os.environ.get("POPPY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
    return {
        "host": url.hostname,
        "port": port or url.port or 6379,
        "db": int(url.path.strip("/") or 0),
        "socket_connect_timeout": 2,
        "retry": Retry(NoBackoff(), 0),
    }


def _publish(times: int) -> None:
    """What a busy process publishes: each message's nudge, then a reply's text deltas."""
    for seq in range(times):
        publishing.nudge_on_commit(
            CONVERSATION, seq, {"status": "working"}, version=f"{seq}.0", state={}, events=list
        )
        publishing.publish_deltas([(CONVERSATION, "msg_1", "a piece")])


@pytest.mark.django_db(transaction=True)  # nudges are published once their write commits
def test_redis_away_is_logged_once_a_streak(caplog: pytest.LogCaptureFixture) -> None:
    with override_settings(EVENTSTREAM_REDIS=_redis()):
        _publish(1)  # Redis here: whatever an earlier test left failing ends before we look
    caplog.set_level(logging.INFO, logger="poppy_django.fanout")
    with override_settings(EVENTSTREAM_REDIS=_redis(port=free_port())):
        _publish(20)
    with override_settings(EVENTSTREAM_REDIS=_redis()):
        _publish(3)
    lines = [
        (r.levelname, r.getMessage()) for r in caplog.records if r.name == "poppy_django.fanout"
    ]
    assert [level for level, _ in lines] == ["WARNING", "INFO"], lines
    warned, back = lines[0][1], lines[1][1]
    assert warned.startswith("poppy: publishing on Redis failed: redis.exceptions.ConnectionError")
    assert "Connection refused" in warned and "nothing is lost" in warned
    assert back.startswith("poppy: publishing on Redis works again, after ")
    assert back.endswith(" and 40 failures"), back
