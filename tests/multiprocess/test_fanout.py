"""Across processes: two web processes, two workers, one PostgreSQL, one Redis.

A reply written by any worker reaches a reader on any web process at once, deltas included;
a Redis restart loses nothing; a write whose wake-up failed is in every process's reads once
Redis answers its writer.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

from tests.agents import PersonalAgent, company_messages
from tests.multiprocess.cluster import Cluster
from tests.multiprocess.redis_cut import RedisCut
from tests.waiting import eventually

pytestmark = pytest.mark.multiprocess


def _settled(events: list[dict[str, Any]]) -> bool:
    return bool(events) and events[-1]["type"] == "state" and events[-1]["status"] == "idle"


@pytest.fixture
def two_of_each(mp: Cluster) -> tuple[str, str]:
    web_a, web_b = mp.web("web-a"), mp.web("web-b")
    mp.worker("worker-1")
    mp.worker("worker-2")
    return web_a, web_b


def test_stream_on_one_process_relays_a_turn_posted_to_another(mp: Cluster, two_of_each):
    web_a, web_b = two_of_each
    pa = PersonalAgent()
    conversation_id = pa.at(web_b).post("", pa.message("hello")).json()["conversation_id"]
    last = pa.at(web_b).events_until(conversation_id, _settled)[-1]["id"]

    frames: list[tuple[str | None, str | None, dict[str, Any]]] = []
    opened = threading.Event()

    def read_stream() -> None:
        for frame in pa.at(web_a).stream(conversation_id, opened, **{"Last-Event-ID": last}):
            frames.append(frame)
            if frame[0] is None and frame[2]["type"] == "state" and frame[2]["status"] == "idle":
                return

    reader = threading.Thread(target=read_stream, daemon=True)
    reader.start()
    assert opened.wait(30), "the stream did not open"  # listening before we post
    assert pa.at(web_b).post(f"/{conversation_id}/messages", pa.message("#slow")).status_code == 202
    reader.join(timeout=30)
    assert not reader.is_alive(), frames

    deltas = [data for name, _, data in frames if name == "text-delta"]
    stored = [data for name, _, data in frames if name is None]
    assert [e["type"] for e in stored] == ["message", "state", "message", "state"]
    reply = stored[2]["message"]
    assert reply["text"] == "Let me check that for you."
    assert deltas and "".join(d["text"] for d in deltas) == reply["text"]
    assert {d["message_id"] for d in deltas} == {reply["id"]}
    # Deltas carry no id and all come before the complete message.
    assert all(event_id is None for name, event_id, _ in frames if name == "text-delta")
    kinds = [name or data["type"] for name, _, data in frames]
    assert kinds.index("text-delta") < kinds.index("message", 1)
    assert max(i for i, k in enumerate(kinds) if k == "text-delta") < len(kinds) - 2


def test_long_poll_on_one_process_wakes_for_a_message_posted_to_another(mp: Cluster, two_of_each):
    web_a, web_b = two_of_each
    pa = PersonalAgent()
    conversation_id = pa.at(web_a).post("", pa.message("hello")).json()["conversation_id"]
    cursor = pa.at(web_a).events_until(conversation_id, _settled)[-1]["id"]

    def post_once_waiting() -> None:
        # web_b subscribes to Redis when its first reader starts listening: this one.
        eventually(mp.subscribed, what="web_b's long-poll listening")
        pa.at(web_a).post(f"/{conversation_id}/messages", pa.message("are you there?"))

    poster = threading.Thread(target=post_once_waiting, daemon=True)
    poster.start()
    began = time.monotonic()
    page = pa.at(web_b).page(conversation_id, cursor=cursor, wait=25)
    waited = time.monotonic() - began
    poster.join(timeout=30)
    assert page["events"][0]["message"]["text"] == "are you there?"
    # Pushed, not polled: well before the 10 s fallback re-read would have found it.
    assert waited < 6, waited


def test_redis_restart_loses_nothing(mp: Cluster, two_of_each):
    web_a, web_b = two_of_each
    pa = PersonalAgent()
    conversation_id = pa.at(web_a).post("", pa.message("hello")).json()["conversation_id"]
    last = pa.at(web_a).events_until(conversation_id, _settled)[-1]["id"]

    seen: list[dict[str, Any]] = []
    opened = threading.Event()

    def read_stream() -> None:
        for name, _, data in pa.at(web_a).stream(
            conversation_id, opened, **{"Last-Event-ID": last}
        ):
            if name is None:
                seen.append(data)
                replies = company_messages(seen)
                if (
                    replies
                    and replies[-1]["text"] == "You said: after the outage"
                    and (data["type"] == "state" and data["status"] == "idle")
                ):
                    return

    reader = threading.Thread(target=read_stream, daemon=True)
    reader.start()
    assert opened.wait(30), "the stream did not open"

    mp.stop_redis()
    # Accepted while Redis is down: durable in PostgreSQL, dispatched later by the reaper.
    during = pa.at(web_b).post(f"/{conversation_id}/messages", pa.message("during the outage"))
    assert during.status_code == 202
    mp.start_redis()
    eventually(mp.subscribed, what="web_a's subscription to come back after the restart")
    after = pa.at(web_b).post(f"/{conversation_id}/messages", pa.message("after the outage"))
    assert after.status_code == 202

    def answered() -> bool:
        """The reaper dispatched what the outage held back, and the stream saw the reply."""
        mp.manage("poppy_reap")
        reader.join(timeout=2)
        return not reader.is_alive()

    eventually(answered, timeout=60, what=lambda: f"the stream to end; it saw {seen}")

    sequence = [int(event["id"].rpartition("_")[2]) for event in seen]
    assert sequence == list(range(sequence[0], sequence[0] + len(sequence)))  # no gaps
    # One turn answers every message since the last answered one (here: both, or each).
    assert company_messages(seen)[-1]["text"] == "You said: after the outage"
    users = [
        e["message"]["text"]
        for e in seen
        if e["type"] == "message" and e["message"]["role"] == "user"
    ]
    assert users == ["during the outage", "after the outage"]


def _read_your_writes(pa: PersonalAgent, web_a: str, web_b: str, conversation_id: str) -> None:
    """Ten messages acknowledged by ``web_a``, each in the very next read on ``web_b``."""
    cursor = pa.at(web_b).read(conversation_id).json()["cursor"]  # web_b's tail holds it now
    for n in range(10):
        sent = pa.at(web_a).send(conversation_id, None, context={"n": n})
        assert sent.status_code == 202, sent.content
        page = pa.at(web_b).read(conversation_id, f"?cursor={cursor}").json()
        assert [e["message"]["context"]["n"] for e in page["events"]] == [n], page
        cursor = page["cursor"]


def test_a_message_acknowledged_by_one_process_is_in_the_next_read_on_another(
    mp: Cluster, two_of_each
):
    """Read-your-writes across web processes and their tails of recent events (issue 54):
    the other process's tail holds the conversation, and must not answer from it a read that
    misses a message the client was told of — whether that process hears the writes or not
    (it is subscribed only while a reader of its own waits)."""
    web_a, web_b = two_of_each
    pa = PersonalAgent()
    unheard = pa.at(web_a).start(None, context={"locale": "en-GB"}).json()["conversation_id"]
    _read_your_writes(pa, web_a, web_b, unheard)

    waiting = pa.at(web_a).start(None, context={"locale": "en-GB"}).json()["conversation_id"]
    woken: list[dict[str, Any]] = []
    cursor = pa.at(web_b).read(waiting).json()["cursor"]
    waiter = threading.Thread(
        target=lambda: woken.append(pa.at(web_b).page(waiting, cursor=cursor, wait=30)),
        daemon=True,
    )
    waiter.start()
    eventually(mp.subscribed, what="web_b's long-poll listening")
    heard = pa.at(web_a).start(None, context={"locale": "en-GB"}).json()["conversation_id"]
    _read_your_writes(pa, web_a, web_b, heard)
    pa.at(web_a).send(waiting, None, context={"done": True})
    waiter.join(timeout=30)
    assert woken and woken[0]["events"], woken


def test_a_write_whose_wake_up_failed_is_read_on_every_process_once_redis_answers(mp: Cluster):
    """A web process cut off from Redis at the moment of a write: its wake-up, which sets the
    conversation's version, fails, and Redis keeps the previous write's version, which both
    processes' tails hold. Once Redis answers the writer again, neither answers a read
    without the write: the writer trusts no version of it meanwhile, and its retry marks the
    conversation out of date on Redis, which the other process reads."""
    with RedisCut(mp.redis_port) as cut:
        web_a = mp.web("web-a", env={"REDIS_URL": cut.url()})
        web_b = mp.web("web-b")
        pa = PersonalAgent()
        started = pa.at(web_a).start(None, context={"locale": "en-GB"})
        conversation_id = started.json()["conversation_id"]
        cursor = pa.at(web_b).read(conversation_id).json()["cursor"]
        for web in (web_a, web_b):  # each one's tail holds it now, as the version vouches
            assert pa.at(web).read(conversation_id, f"?cursor={cursor}").json()["events"] == []
        versions = redis.Redis(port=mp.redis_port)
        (key,) = versions.keys(f"*:version:poppy-{conversation_id}@*")
        held = versions.get(key)
        assert held is not None

        cut.sever()
        sent = pa.at(web_a).send(conversation_id, None, context={"n": 1})
        assert sent.status_code == 202, sent.content
        assert versions.get(key) == held  # what the tails hold, without the write
        cut.mend()

        def contexts(web: str) -> list[Any]:
            page = pa.at(web).read(conversation_id, f"?cursor={cursor}").json()
            return [event["message"]["context"] for event in page["events"]]

        assert contexts(web_a) == [{"n": 1}]
        eventually(lambda: versions.get(key) not in (None, held), what="web-a's retry")
        assert contexts(web_b) == [{"n": 1}]
        versions.close()
