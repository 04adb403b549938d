"""Bounds per caller over HTTP: DRF rate throttles and concurrent waiting reads, as 429s."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest
from django.core.cache import cache

from tests.agents import PersonalAgent
from tests.waiting import Clock, eventually
from tests.wire.wire_support import (
    assert_error,
    no_waiting_slot_held,
    poppy,
    quiet_start,
    rows,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_counts(throttle_clock: Clock) -> Iterator[None]:
    # Streams other tests opened through the test client and never read hold their slot
    # until they are collected (the ASGI server always reads or closes them).
    gc.collect()
    cache.clear()
    yield
    cache.clear()


def assert_too_many(response) -> int:
    assert_error(response, 429, "too_many_requests")
    retry_after = int(response["Retry-After"])
    assert retry_after >= 1
    return retry_after


def test_conversation_starts_are_throttled_per_personal_agent_and_user(agent):
    with poppy(THROTTLE_RATES={"conversation_start": "2/minute", "message": None}):
        quiet_start(agent)
        quiet_start(agent)
        before = rows()
        assert_too_many(agent.start(None, context={"locale": "en"}))
        assert rows() == before
        # Another User of the same personal agent, and the same User elsewhere, are not.
        assert agent.start(None, context={"a": 1}).status_code == 429
        quiet_start(PersonalAgent(agent.client_id))
        quiet_start(PersonalAgent("https://other.example/pa", agent.user_id))


def test_messages_are_throttled_and_starts_count_apart(agent):
    with poppy(THROTTLE_RATES={"conversation_start": None, "message": "3/hour"}):
        conversation_id = quiet_start(agent)
        for n in range(3):
            assert agent.send(conversation_id, None, context={"n": n}).status_code == 202
        before = rows()
        retry_after = assert_too_many(agent.send(conversation_id, None, context={"n": 9}))
        assert retry_after <= 3600
        assert rows() == before
        # Reads, handoffs and new conversations are not messages.
        assert agent.read(conversation_id).status_code == 200
        quiet_start(agent)


def test_an_unreachable_cache_counts_nothing_and_refuses_nothing(agent, settings):
    """A Redis restart must not turn messages the database can record into errors."""
    settings.CACHES = {
        **settings.CACHES,
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:9/0",  # nothing listens there
        },
    }
    with poppy(THROTTLE_RATES={"conversation_start": "1/minute", "message": "1/minute"}):
        conversation_id = quiet_start(agent)
        quiet_start(agent)
        for n in range(2):
            assert agent.send(conversation_id, None, context={"n": n}).status_code == 202


def test_the_default_rates_throttle_starts_and_messages(agent):
    """Sensible defaults: a burst far past a person's pace is refused."""
    statuses = [agent.start(None, context={"n": n}).status_code for n in range(31)]
    assert statuses[:30] == [201] * 30
    assert statuses[30] == 429


def hold_long_poll(agent: PersonalAgent, conversation_id: str, seconds: float) -> threading.Thread:
    """A long-poll held open in a thread: after the last event, with nothing happening."""
    cursor = agent.read(conversation_id).json()["cursor"]
    query = f"?wait={seconds}&cursor={cursor}"
    same_caller = PersonalAgent(agent.client_id, agent.user_id)  # a test client per thread

    def hold() -> None:
        # A probe of the test's may take the only slot first: then try again until held
        # (bounded: a slot leaked by an earlier request would otherwise spin here forever).
        eventually(
            lambda: same_caller.read(conversation_id, query).status_code != 429,
            what="the long-poll to hold a slot",
        )

    thread = threading.Thread(target=hold)
    thread.start()
    return thread


def first_refusal(call) -> object:
    """Retry ``call`` until it is refused: the held read may not have started yet."""
    return eventually(lambda: (r := call()).status_code == 429 and r, what="a 429")


def test_waiting_reads_are_bounded_per_caller(agent):
    with poppy(MAX_WAITING_PER_CALLER=1):
        conversation_id = quiet_start(agent)
        held = hold_long_poll(agent, conversation_id, 3)
        refused = first_refusal(lambda: agent.read(conversation_id, "?wait=0.2"))
        assert_too_many(refused)
        # A read that does not wait holds nothing and is always answered.
        assert agent.read(conversation_id).status_code == 200
        assert agent.read(conversation_id, "?wait=0").status_code == 200
        # So is another caller.
        other = PersonalAgent(agent.client_id)
        assert other.read(quiet_start(other), "?wait=0.1").status_code == 200
        # A POST that would wait is refused before it writes anything.
        before = rows()
        assert_too_many(agent.send(conversation_id, "hi", query="?wait=1"))
        assert rows() == before
        held.join()
        assert agent.read(conversation_id, "?wait=0.1").status_code == 200


def test_waiting_reads_are_bounded_per_process(agent):
    # Every earlier test's waiting reads have given their slots back (cancelled ones too:
    # test_waiting_slots.py), so the one slot is this test's to take.
    no_waiting_slot_held()
    with poppy(MAX_WAITING_PER_PROCESS=1):
        conversation_id = quiet_start(agent)
        held = hold_long_poll(agent, conversation_id, 3)
        other = PersonalAgent(agent.client_id)
        other_id = quiet_start(other)
        assert_too_many(first_refusal(lambda: other.read(other_id, "?wait=0.2")))
        held.join()
        assert other.read(other_id, "?wait=0.1").status_code == 200


def test_a_stream_holds_a_slot_until_the_client_hangs_up(agent):
    from tests.stream.asgi import get

    path = lambda cid: f"/poppy/conversations/{cid}/events"  # noqa: E731
    headers = {
        "authorization": agent.headers()["HTTP_AUTHORIZATION"],
        "accept": "text/event-stream",
    }
    with poppy(MAX_WAITING_PER_CALLER=1):
        conversation_id = quiet_start(agent)
        streaming = threading.Thread(
            target=get, args=(path(conversation_id), headers), kwargs={"hang_up_after": 3}
        )
        streaming.start()
        refused = first_refusal(
            lambda: agent.read(conversation_id, HTTP_ACCEPT="text/event-stream")
        )
        assert_too_many(refused)
        streaming.join()
        # The hung-up stream gives its slot back (once the server has seen the hang-up).
        eventually(
            lambda: get(path(conversation_id), headers, hang_up_after=0.2).status == 200,
            what="the slot back",
        )
