"""The wake-up bus: delivery to a process's waiting readers, in-process and over Redis.

Across real processes (two web processes, two workers, a Redis restart):
tests/multiprocess/test_fanout.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from django.test import override_settings

from poppy_django.fanout import bus, versions
from poppy_django.fanout.bus import MAX_PENDING, Inbox, open_inboxes
from poppy_django.fanout.retrying import Backoff
from tests.waiting import until

KEY = "poppy-bus-test"


def _publish_from_another_thread(count: int, key: str = KEY) -> None:
    """Publishes come from worker threads in production (turns, writes committing)."""
    sender = threading.Thread(
        target=lambda: [bus.publish(key, "poppy.test", {"n": n}) for n in range(count)]
    )
    sender.start()
    sender.join()


def _in_process(scenario: Callable[[], Awaitable[Any]]) -> Any:
    with override_settings(EVENTSTREAM_REDIS=None):
        return asyncio.run(scenario())


def test_messages_published_in_process_reach_an_open_inbox_in_order():
    async def scenario():
        inbox, elsewhere = Inbox(KEY), Inbox("poppy-another-conversation")
        inbox.open()
        elsewhere.open()
        try:
            _publish_from_another_thread(3)
            received = await inbox.receive(timeout=5)
            return received, await elsewhere.receive(timeout=0.2)
        finally:
            inbox.close()
            elsewhere.close()

    (dropped, items), nothing = _in_process(scenario)
    assert not dropped
    assert [(item.type, item.data) for item in items] == [
        ("poppy.test", {"n": n}) for n in range(3)
    ]
    assert nothing == (False, [])


def test_a_full_inbox_says_messages_were_dropped():
    async def scenario():
        inbox = Inbox(KEY)
        inbox.open()
        try:
            _publish_from_another_thread(MAX_PENDING + 5)
            # The sender has returned: every delivery is queued on this loop before the
            # wake-up of this sleep, so one turn of the loop runs them all.
            await asyncio.sleep(0)
            return await inbox.receive(timeout=5)
        finally:
            inbox.close()

    dropped, items = _in_process(scenario)
    assert dropped
    assert [item.data["n"] for item in items] == list(range(MAX_PENDING))


def test_receive_waits_until_poked_from_another_thread():
    async def scenario():
        inbox = Inbox(KEY)
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

    assert _in_process(scenario) == (True, [])


def test_a_closed_inbox_receives_nothing_more():
    async def scenario():
        inbox = Inbox(KEY)
        inbox.open()
        assert inbox in open_inboxes()
        inbox.close()
        assert inbox not in open_inboxes()
        _publish_from_another_thread(1)
        return await inbox.receive(timeout=0.2)

    assert _in_process(scenario) == (False, [])


# Over Redis ---------------------------------------------------------------------------


@pytest.fixture
def redis_kwargs() -> dict[str, Any]:
    url = urlsplit(os.environ.get("POPPY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
    return {
        "host": url.hostname,
        "port": url.port or 6379,
        "db": int(url.path.strip("/") or 0),
        # Lets a test find and drop this bus's subscription only (the server is shared).
        "client_name": f"poppy-bus-test-{os.getpid()}",
    }


@pytest.fixture
def server(redis_kwargs) -> redis.Redis:
    client = redis.Redis(**{**redis_kwargs, "client_name": None})
    yield client
    client.close()


def _over_redis(redis_kwargs: dict[str, Any], scenario: Callable[[], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        try:
            return await scenario()
        finally:
            for task in list(bus._subscriptions.values()):
                task.cancel()

    with override_settings(EVENTSTREAM_REDIS=redis_kwargs):
        return asyncio.run(run())


def test_a_message_published_by_another_process_reaches_the_reader(redis_kwargs, server):
    """Another process publishes with its own client: what arrives is the message itself."""

    def subscribed() -> bool:
        return bool(server.pubsub_numsub(bus.redis_channel())[0][1])

    async def scenario():
        inbox = Inbox(KEY)
        inbox.open()
        try:
            # The subscription's confirmation pokes every reader of the loop once: anything
            # published before it may be lost.
            assert await inbox.receive(timeout=20) == (True, [])
            assert subscribed()
            message = {"key": KEY, "type": "poppy.test", "data": {"n": 1}}
            server.publish(bus.redis_channel(), json.dumps(message))
            server.publish(bus.redis_channel(), json.dumps({**message, "key": "poppy-other"}))
            return await inbox.receive(timeout=20)
        finally:
            inbox.close()

    dropped, items = _over_redis(redis_kwargs, scenario)
    assert not dropped
    assert [(item.type, item.data) for item in items] == [("poppy.test", {"n": 1})]


def test_a_batch_is_one_redis_message_and_each_reader_gets_its_items_in_order(redis_kwargs, server):
    """A tick's text deltas of every conversation go out in one PUBLISH (what the turn
    engine's publishing thread sends); each reader receives its own, in order."""
    watcher = server.pubsub()
    with override_settings(EVENTSTREAM_REDIS=redis_kwargs):
        watcher.subscribe(bus.redis_channel())
    assert watcher.get_message(timeout=5)["type"] == "subscribe"
    batch = [
        (KEY, "poppy.delta", {"n": 1}),
        ("poppy-other", "poppy.delta", {"n": 2}),
        (KEY, "poppy.delta", {"n": 3}),
    ]

    async def scenario():
        inbox = Inbox(KEY)
        inbox.open()
        try:
            await inbox.receive(timeout=20)  # subscribed
            bus.publish_many(batch)
            received: list[Any] = []
            while len(received) < 2:
                received += (await inbox.receive(timeout=20))[1]
            return received
        finally:
            inbox.close()

    items = _over_redis(redis_kwargs, scenario)
    assert [(item.type, item.data) for item in items] == [
        ("poppy.delta", {"n": 1}),
        ("poppy.delta", {"n": 3}),
    ]
    sent = [watcher.get_message(timeout=5), watcher.get_message(timeout=0.5)]
    watcher.close()
    assert sent[1] is None
    assert [entry["data"] for entry in json.loads(sent[0]["data"])["batch"]] == [
        {"n": 1},
        {"n": 2},
        {"n": 3},
    ]


def test_malformed_messages_are_ignored(redis_kwargs, server):
    async def scenario():
        inbox = Inbox(KEY)
        inbox.open()
        try:
            await inbox.receive(timeout=20)  # subscribed
            for junk in ("not json", "[]", json.dumps({"key": KEY, "type": "x", "data": 3})):
                server.publish(bus.redis_channel(), junk)
            bus.publish(KEY, "poppy.test", {"n": 2})
            return await inbox.receive(timeout=20)
        finally:
            inbox.close()

    dropped, items = _over_redis(redis_kwargs, scenario)
    assert (dropped, [item.data for item in items]) == (False, [{"n": 2}])


def test_a_dropped_subscription_comes_back_and_readers_re_read(redis_kwargs, server, monkeypatch):
    """A dropped connection (a Redis restart) must not end the subscription for good.

    Whether redis-py reconnects the subscription itself or the bus starts a new one, the
    readers are poked (what was published meanwhile is lost) and later messages arrive
    (a real Redis restart: tests/multiprocess/test_fanout.py::test_redis_restart_loses_nothing).
    """
    monkeypatch.setattr(bus, "subscription_backoff", lambda: Backoff(first=0.05))

    def subscribers() -> list[str]:
        return [
            c["id"]
            for c in server.client_list()
            if c["name"] == redis_kwargs["client_name"] and int(c.get("sub", 0)) > 0
        ]

    async def scenario():
        inbox = Inbox(KEY)
        inbox.open()
        try:
            await inbox.receive(timeout=20)  # subscribed
            dropped_ids = subscribers()
            assert len(dropped_ids) == 1
            server.client_kill_filter(_id=dropped_ids[0])
            poked = await inbox.receive(timeout=20)
            await until(lambda: subscribers() not in ([], dropped_ids))
            bus.publish(KEY, "poppy.test", {"n": 1})
            return poked, await inbox.receive(timeout=20)
        finally:
            inbox.close()

    poked, (dropped, items) = _over_redis(redis_kwargs, scenario)
    assert poked == (True, [])
    assert not dropped
    assert [item.data for item in items] == [{"n": 1}]


# A versioned publish that fails ------------------------------------------------------------
# A write's version is set on Redis with its nudge (one script): when that publish fails, the
# previous write's version stays there, and every process's tail would go on trusting it.

VERSIONED = "poppy-versioned-test"


def _failed_over(server: redis.Redis, previous: str, failing: str) -> None:
    """The previous write's version is on Redis; the next write's publish fails."""
    server.set(versions.version_key(VERSIONED), previous, ex=versions.VERSION_SECONDS)
    with pytest.raises(redis.ConnectionError):
        bus.publish(VERSIONED, "poppy.test", {}, version=failing)


def test_a_failed_versioned_publish_is_not_trusted_here_at_once_nor_anywhere_once_retried(
    redis_kwargs, server, publish_fault, held_retries
):
    async def scenario():
        key = versions.version_key(VERSIONED)
        publish_fault.arm()
        _failed_over(server, "4.1.n", "5.1.n")
        assert publish_fault.failed == 1
        # What every other process compares its tail with, until the retry: the old version.
        assert server.get(key) == b"4.1.n"
        assert await versions.current_version(VERSIONED) is None  # this process: none, at once
        held_retries.release()
        await until(lambda: server.get(key) != b"4.1.n", what="the retry")
        await until(lambda: versions.current_version(VERSIONED), what="this process to ask Redis")
        return server.get(key), await versions.current_version(VERSIONED)

    # Out of date, as after a pruning: no tail holds it, the next write's version replaces it.
    assert _over_redis(redis_kwargs, scenario) == (versions.FORGOTTEN.encode(), versions.FORGOTTEN)


def test_a_retry_never_replaces_a_newer_writes_version(
    redis_kwargs, server, publish_fault, held_retries
):
    async def scenario():
        publish_fault.arm()
        _failed_over(server, "4.1.n", "5.1.n")
        # Another process's newer write sets its version (its publish's SET) before the retry.
        server.set(versions.version_key(VERSIONED), "6.1.n", ex=versions.VERSION_SECONDS)
        held_retries.release()
        await until(lambda: versions.current_version(VERSIONED), what="the retry")
        key = versions.version_key(VERSIONED)
        return await versions.current_version(VERSIONED), server.get(key)

    assert _over_redis(redis_kwargs, scenario) == ("6.1.n", b"6.1.n")


def test_a_newer_version_published_here_ends_the_retry(
    redis_kwargs, server, publish_fault, held_retries
):
    async def scenario():
        publish_fault.arm()
        _failed_over(server, "4.1.n", "5.1.n")
        assert await versions.current_version(VERSIONED) is None
        bus.publish(VERSIONED, "poppy.test", {}, version="6.1.n")  # the retry still held
        return await versions.current_version(VERSIONED)

    assert _over_redis(redis_kwargs, scenario) == "6.1.n"


def test_the_newest_failed_write_is_what_the_retry_stands_for(
    redis_kwargs, server, publish_fault, held_retries
):
    """Two writes' publishes fail here, the newer one's first (the older's commit callback
    ran late): the retry is the newer write's, so the older write's version, set on Redis
    meanwhile, is not taken for one at least as new."""

    async def scenario():
        publish_fault.arm()
        _failed_over(server, "4.1.n", "6.1.n")
        publish_fault.arm()
        _failed_over(server, "5.1.n", "5.1.n")
        held_retries.release()
        await until(lambda: versions.current_version(VERSIONED), what="the retry")
        return await versions.current_version(VERSIONED)

    assert _over_redis(redis_kwargs, scenario) == versions.FORGOTTEN


# Publishes that land out of order ------------------------------------------------------------
# Two writes of one conversation commit in order, but their publishes (on commit, in two
# processes or threads) may land in the other order: the older write's version must not
# replace the newer one's, or a tail holding the older state would be trusted without the
# newer write. Its nudge still goes out.


@pytest.mark.parametrize(
    ("newer", "older"),
    [("6.1.n", "5.1.n"), ("6.2.n", "6.1.n"), ("6.1.n", "5.3.a")],
    ids=["an-older-seq", "an-older-pruning", "seq-before-pruning"],
)
def test_an_older_writes_late_publish_keeps_the_newer_version_and_wakes_readers(
    redis_kwargs, server, newer, older
):
    async def scenario():
        inbox = Inbox(VERSIONED)
        inbox.open()
        try:
            assert await inbox.receive(timeout=20) == (True, [])  # subscribed
            # Another process's newer write has set its version (its publish's SET).
            server.set(versions.version_key(VERSIONED), newer, ex=versions.VERSION_SECONDS)
            bus.publish(VERSIONED, "poppy.test", {"n": 1}, version=older)
            _, items = await inbox.receive(timeout=20)
            return [item.data for item in items], await versions.current_version(VERSIONED)
        finally:
            inbox.close()

    assert _over_redis(redis_kwargs, scenario) == ([{"n": 1}], newer)


@pytest.mark.parametrize("held", ["5.1.n", "6.0.n", "6.1.n", versions.FORGOTTEN, ""])
def test_a_publish_replaces_an_older_or_equal_version_and_any_mark(redis_kwargs, server, held):
    async def scenario():
        server.set(versions.version_key(VERSIONED), held, ex=versions.VERSION_SECONDS)
        bus.publish(VERSIONED, "poppy.test", {}, version="6.1.a")
        return await versions.current_version(VERSIONED)

    assert _over_redis(redis_kwargs, scenario) == "6.1.a"


def test_in_process_an_older_writes_late_publish_keeps_the_newer_version():
    async def scenario():
        inbox = Inbox(VERSIONED)
        inbox.open()
        try:
            for version in ("6.2.n", "6.1.n", "5.9.n"):  # the newest write's publish first
                bus.publish(VERSIONED, "poppy.test", {"v": version}, version=version)
            kept = await versions.current_version(VERSIONED)
            bus.publish(VERSIONED, "poppy.test", {"v": "7.2.n"}, version="7.2.n")
            _, items = await inbox.receive(timeout=5)
            return kept, await versions.current_version(VERSIONED), len(items)
        finally:
            inbox.close()

    assert _in_process(scenario) == ("6.2.n", "7.2.n", 4)


# An out-of-date mark that fails --------------------------------------------------------------
# A pruning, a deletion or an account's binding marks its key out of date on Redis
# (versions.forget_version): when that fails, the version from before it stays there, and every
# process's tail would go on trusting it, with what the change took away.


def _mark_failed_over(server: redis.Redis, previous: str) -> None:
    """The version from before the pruning is on Redis; the pruning's mark fails."""
    server.set(versions.version_key(VERSIONED), previous, ex=versions.VERSION_SECONDS)
    with pytest.raises(redis.TimeoutError):
        versions.forget_version(VERSIONED)


def test_a_failed_mark_is_not_trusted_here_at_once_nor_anywhere_once_retried(
    redis_kwargs, server, publish_fault, held_retries
):
    async def scenario():
        key = versions.version_key(VERSIONED)
        publish_fault.arm_mark()
        _mark_failed_over(server, "4.1.n")
        assert publish_fault.failed == 1
        assert server.get(key) == b"4.1.n"  # what other processes compare with, until the retry
        assert await versions.current_version(VERSIONED) is None  # this process: none, at once
        held_retries.release()
        await until(lambda: versions.current_version(VERSIONED), what="the retry")
        return server.get(key), await versions.current_version(VERSIONED)

    assert _over_redis(redis_kwargs, scenario) == (versions.FORGOTTEN.encode(), versions.FORGOTTEN)


def test_a_failed_mark_is_retried_whatever_a_later_publish_set(
    redis_kwargs, server, publish_fault, held_retries
):
    """A publish that lands after the failed mark, here or in another process, may be a
    write's committed before the pruning (its version says nothing of it): it ends neither
    the retry nor this process's distrust, and a publish failing here meanwhile does not
    turn the retry into one that a newer version stops."""

    async def scenario():
        key = versions.version_key(VERSIONED)
        publish_fault.arm_mark()
        _mark_failed_over(server, "4.1.n")
        bus.publish(VERSIONED, "poppy.test", {}, version="5.1.n")
        assert server.get(key) == b"5.1.n"
        assert await versions.current_version(VERSIONED) is None
        publish_fault.arm()
        with pytest.raises(redis.ConnectionError):
            bus.publish(VERSIONED, "poppy.test", {}, version="6.1.n")
        server.set(key, "7.1.n", ex=versions.VERSION_SECONDS)  # another process's
        held_retries.release()
        await until(lambda: versions.current_version(VERSIONED), what="the retry")
        return server.get(key)

    assert _over_redis(redis_kwargs, scenario) == versions.FORGOTTEN.encode()


def test_a_mark_failing_after_a_publish_failed_is_retried_as_a_mark(
    redis_kwargs, server, publish_fault, held_retries
):
    async def scenario():
        publish_fault.arm()
        _failed_over(server, "4.1.n", "5.1.n")
        publish_fault.arm_mark()
        _mark_failed_over(server, "6.1.n")  # a newer write's, then the pruning
        held_retries.release()
        await until(lambda: versions.current_version(VERSIONED), what="the retry")
        return server.get(versions.version_key(VERSIONED))

    assert _over_redis(redis_kwargs, scenario) == versions.FORGOTTEN.encode()
