"""The SSE stream, rule by rule, through the real ASGI handler (in-process).

The same rules across processes and a Redis restart are in tests/multiprocess.
"""

from __future__ import annotations

import threading
import time

import pytest

from poppy_django import service
from poppy_django.fanout.bus import open_inboxes
from poppy_django.models import Conversation, Event
from tests.agents import PersonalAgent, messages
from tests.stream.asgi import get

pytestmark = pytest.mark.django_db(transaction=True)
SSE = {"accept": "text/event-stream"}


def _headers(pa: PersonalAgent, **extra: str) -> dict[str, str]:
    return {"authorization": pa.headers()["HTTP_AUTHORIZATION"], **SSE, **extra}


def _path(conversation_id: str, query: str = "") -> str:
    return f"/poppy/conversations/{conversation_id}/events{query}"


def _closed_conversation(pa: PersonalAgent) -> tuple[str, list[dict]]:
    conversation_id = pa.start("hello").json()["conversation_id"]
    pa.settled(conversation_id)
    pa.post(f"/{conversation_id}/close", {})
    return conversation_id, pa.read(conversation_id).json()["events"]


def test_stream_frames_every_stored_event_with_its_id_and_json(agent: PersonalAgent):
    conversation_id, stored = _closed_conversation(agent)
    response = get(_path(conversation_id), _headers(agent))
    assert response.status == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    frames = response.frames
    assert [f.id for f in frames] == [e["id"] for e in stored]
    assert [f.json() for f in frames] == stored
    assert all(f.event == "message" for f in frames)


def test_stream_ends_after_the_closed_state_event(agent: PersonalAgent):
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    opened = threading.Event()

    def close_once_open() -> None:
        assert opened.wait(20)
        service.close(conversation_id, by="sam")

    closer = threading.Thread(target=close_once_open)
    closer.start()
    response = get(_path(conversation_id), _headers(agent), timeout=20, opened=opened)
    closer.join()
    last = response.stored[-1]
    assert last["type"] == "state" and last["status"] == "closed"


def test_resume_after_last_event_id_sends_only_what_follows(agent: PersonalAgent):
    conversation_id, stored = _closed_conversation(agent)
    response = get(_path(conversation_id), _headers(agent, **{"last-event-id": stored[1]["id"]}))
    assert response.stored == stored[2:]
    # ``cursor`` does the same; Last-Event-ID wins when both are given.
    by_cursor = get(_path(conversation_id, f"?cursor={stored[2]['id']}"), _headers(agent))
    assert by_cursor.stored == stored[3:]
    both = get(
        _path(conversation_id, f"?cursor={stored[0]['id']}"),
        _headers(agent, **{"last-event-id": stored[3]["id"]}),
    )
    assert both.stored == stored[4:]


@pytest.mark.parametrize("bad", ["garbage", "evt_x_1", "evt_other_2"])
def test_a_bad_resume_point_is_a_json_error_before_the_stream_opens(agent: PersonalAgent, bad):
    conversation_id, _ = _closed_conversation(agent)
    response = get(_path(conversation_id), _headers(agent, **{"last-event-id": bad}))
    assert response.status == 400
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"] == "invalid_cursor"


def test_a_pruned_resume_point_is_cursor_expired(agent: PersonalAgent):
    conversation_id, stored = _closed_conversation(agent)
    Event.objects.filter(conversation_id=conversation_id, seq__lte=2).delete()
    Conversation.objects.filter(pk=conversation_id).update(pruned_before_seq=3)
    response = get(_path(conversation_id), _headers(agent, **{"last-event-id": stored[0]["id"]}))
    assert response.status == 410 and response.json()["error"] == "cursor_expired"


def test_a_stream_is_authenticated_and_owned_like_any_read(agent: PersonalAgent):
    conversation_id, _ = _closed_conversation(agent)
    stranger = PersonalAgent()
    response = get(_path(conversation_id), _headers(stranger))
    assert response.status == 404 and response.json()["error"] == "conversation_not_found"
    unauthenticated = get(_path(conversation_id), SSE)
    assert unauthenticated.status == 401 and unauthenticated.json()["error"] == "invalid_token"


def test_keep_alive_comments_hold_a_quiet_stream_open(agent: PersonalAgent, settings):
    settings.POPPY = {**settings.POPPY, "STREAM_KEEPALIVE_SECONDS": 0.2, "STREAM_MAX_SECONDS": 1.0}
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    response = get(_path(conversation_id), _headers(agent), timeout=20)
    assert response.comments.count("keep-alive") >= 2


def test_a_stream_closes_after_its_maximum_time(agent: PersonalAgent, settings):
    settings.POPPY = {**settings.POPPY, "STREAM_MAX_SECONDS": 0.5}
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    began = time.monotonic()
    response = get(_path(conversation_id), _headers(agent), timeout=20)
    assert response.status == 200
    assert time.monotonic() - began < 10
    assert response.stored[-1]["status"] == "idle"  # ended by time, not by closing


def test_deltas_come_live_without_id_before_their_complete_message(agent: PersonalAgent):
    conversation_id = agent.start("hello").json()["conversation_id"]
    events = agent.settled(conversation_id)
    opened = threading.Event()

    def slow_then_close() -> None:
        assert opened.wait(20)  # deltas are live only: the stream must be listening first
        agent.send(conversation_id, "#slow")
        agent.settled(conversation_id)
        agent.post(f"/{conversation_id}/close", {})

    writer = threading.Thread(target=slow_then_close)
    writer.start()
    response = get(
        _path(conversation_id),
        _headers(agent, **{"last-event-id": events[-1]["id"]}),
        timeout=30,
        opened=opened,
    )
    writer.join()
    frames = response.frames
    deltas = [f for f in frames if f.event == "text-delta"]
    reply_index = next(
        i
        for i, f in enumerate(frames)
        if f.event == "message"
        and f.json()["type"] == "message"
        and f.json()["message"]["role"] == "company"
    )
    reply = frames[reply_index].json()["message"]
    assert len(deltas) >= 3 and all(f.id is None for f in deltas)
    assert all(frames.index(d) < reply_index for d in deltas)
    assert {d.json()["message_id"] for d in deltas} == {reply["id"]}
    assert "".join(d.json()["text"] for d in deltas) == reply["text"]

    # A resumed stream never replays deltas.
    replay = get(_path(conversation_id, "?cursor=" + events[-1]["id"]), _headers(agent))
    assert not [f for f in replay.frames if f.event == "text-delta"]
    assert [m["text"] for m in messages(replay.stored)] == ["#slow", reply["text"]]


def _listeners() -> int:
    return len(open_inboxes())


def test_clients_that_hang_up_free_their_listener(agent: PersonalAgent):
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    before = _listeners()
    # Each hang-up that leaked would leave one listener: 200 rounds show a leak of even one
    # in a hundred (1,000 took 20 s of the suite for no more certainty).
    for _ in range(200):
        response = get(
            _path(conversation_id), _headers(agent), hang_up=lambda body: b"id: " in body
        )
        assert response.status == 200
    assert _listeners() == before


def test_long_polls_that_hang_up_free_their_listener(agent: PersonalAgent):
    conversation_id = agent.start("hello").json()["conversation_id"]
    cursor = agent.settled(conversation_id)[-1]["id"]
    before = _listeners()
    headers = {"authorization": agent.headers()["HTTP_AUTHORIZATION"]}
    for _ in range(50):
        started = time.monotonic()
        response = get(
            _path(conversation_id, f"?cursor={cursor}&wait=30"), headers, hang_up_after=0.1
        )
        assert response.body == b""  # hung up before any answer
        assert time.monotonic() - started < 10
    assert _listeners() == before
