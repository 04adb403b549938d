"""The contract with django-eventstream's internals that poppy_django.fanout.eventstream uses.

django-eventstream has no public API for receiving events in Python; the adapter relies on
its listener manager (see that module's docstring). These tests drive the adapter against
the installed django-eventstream and fail loudly when a release changes what it relies on.
"""

from __future__ import annotations

import asyncio
import threading
from urllib.parse import urlsplit

import pytest
import redis
from django.test import override_settings
from django_eventstream import send_event
from django_eventstream.views import MAX_PENDING, ListenerManager, get_listener_manager

from poppy_django.fanout import eventstream
from poppy_django.fanout.eventstream import Inbox, open_inboxes

CHANNEL = "poppy-contract"


def _send_from_another_thread(count: int) -> None:
    """In-process sends come from worker threads in production (turns, writes)."""
    sender = threading.Thread(
        target=lambda: [send_event(CHANNEL, "poppy.test", {"n": n}) for n in range(count)]
    )
    sender.start()
    sender.join()


def test_events_sent_in_process_reach_an_open_inbox_in_order():
    async def scenario():
        inbox = Inbox(CHANNEL)
        inbox.open()
        try:
            _send_from_another_thread(3)
            return await inbox.receive(timeout=5)
        finally:
            inbox.close()

    dropped, items = asyncio.run(scenario())
    assert not dropped
    assert [(item.type, item.data) for item in items] == [
        ("poppy.test", {"n": n}) for n in range(3)
    ]


def test_a_full_queue_says_events_were_dropped():
    async def scenario():
        inbox = Inbox(CHANNEL)
        inbox.open()
        try:
            _send_from_another_thread(MAX_PENDING + 5)
            return await inbox.receive(timeout=5)
        finally:
            inbox.close()

    dropped, items = asyncio.run(scenario())
    assert dropped
    assert [item.data["n"] for item in items] == list(range(MAX_PENDING))


def test_receive_waits_until_poked_from_another_thread():
    async def scenario():
        inbox = Inbox(CHANNEL)
        inbox.open()
        try:
            waiting = asyncio.ensure_future(inbox.receive(timeout=30))
            await asyncio.sleep(0)
            assert not waiting.done()
            poker = threading.Thread(target=inbox.poke)
            poker.start()
            poker.join()
            return await asyncio.wait_for(waiting, 10)
        finally:
            inbox.close()

    assert asyncio.run(scenario()) == (True, [])


def test_a_closed_inbox_leaves_the_listener_manager():
    async def scenario():
        inbox = Inbox(CHANNEL)
        inbox.open()
        manager = get_listener_manager()
        assert inbox in manager.listeners_by_channel[CHANNEL]
        assert inbox in open_inboxes()
        inbox.close()
        assert CHANNEL not in manager.listeners_by_channel
        assert inbox not in open_inboxes()
        send_event(CHANNEL, "poppy.test", {"n": 0})
        return inbox.channel_items

    assert asyncio.run(scenario()) == {}


@pytest.fixture
def redis_kwargs() -> dict:
    url = urlsplit(
        __import__("os").environ.get("POPPY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    )
    return {
        "host": url.hostname,
        "port": url.port or 6379,
        "db": int(url.path.strip("/") or 0),
        # Lets the test find and drop this subscription only (the server is shared).
        "client_name": "poppy-contract-subscriber",
    }


def test_a_dropped_redis_subscription_comes_back(redis_kwargs, monkeypatch):
    """A dropped connection (a Redis restart) must not end the subscription for good.

    redis-py reconnects a briefly dropped subscription itself; when it gives up, the
    adapter's supervisor starts a new one and pokes every reader (a real Redis restart,
    tests/multiprocess/test_fanout.py::test_redis_restart_loses_nothing).
    """
    monkeypatch.setattr(eventstream, "RETRY_FIRST", 0.05)
    server = redis.Redis(**{**redis_kwargs, "client_name": None})

    def subscribers() -> list[str]:
        """The adapter's connections that hold a subscription now."""
        return [
            c["id"]
            for c in server.client_list()
            if c["name"] == redis_kwargs["client_name"] and int(c.get("sub", 0)) > 0
        ]

    async def until(condition) -> None:
        for _ in range(200):
            if condition():
                return
            await asyncio.sleep(0.05)
        raise AssertionError("timed out")

    async def scenario():
        with override_settings(EVENTSTREAM_REDIS=redis_kwargs):
            manager = ListenerManager()  # one with a Redis subscription, as in production
            monkeypatch.setattr("django_eventstream.views.listener_manager", manager)
            inbox = Inbox(CHANNEL)
            inbox.open()
            try:
                await until(lambda: len(subscribers()) == 1)
                dropped_ids = subscribers()
                server.client_kill_filter(_id=dropped_ids[0])
                await until(lambda: subscribers() not in ([], dropped_ids))
                # A send from another process arrives again (send_event publishes to Redis).
                monkeypatch.setattr("django_eventstream.eventstream.redis_client", server)
                send_event(CHANNEL, "poppy.test", {"n": 1})
                return await inbox.receive(timeout=20)
            finally:
                inbox.close()
                for task in eventstream._subscriptions.values():
                    task.cancel()

    _, items = asyncio.run(scenario())
    assert [item.data for item in items] == [{"n": 1}]
