"""POST with ``?wait``: the answer is a read of the events under the POST's own status."""

from __future__ import annotations

import pytest

from tests.agents import kinds, messages
from tests.wire.wire_support import READ_KEYS, assert_error, quiet_start, rows

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_first_message_with_wait_answers_201_with_a_read_from_the_start(agent):
    response = agent.start("hello", query="?wait=10", id="pw-1")
    assert response.status_code == 201
    body = response.json()
    assert set(body) == READ_KEYS
    conversation_id = body["conversation_id"]
    assert body["events"], body
    assert kinds(body["events"])[0] == ("message", "user")
    assert messages(body["events"])[0]["id"] == "pw-1"
    assert body["cursor"] == body["events"][-1]["id"]
    events = agent.settled(conversation_id)
    assert events[: len(body["events"])] == body["events"]


def test_a_message_with_wait_and_cursor_answers_202_with_the_events_after_it(agent):
    conversation_id = quiet_start(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    response = agent.send(conversation_id, "again", query=f"?wait=10&cursor={cursor}", id="pw-2")
    assert response.status_code == 202
    body = response.json()
    assert set(body) == READ_KEYS
    assert body["conversation_id"] == conversation_id
    assert body["events"][0]["message"]["id"] == "pw-2"
    assert body["cursor"] == body["events"][-1]["id"]
    assert body["status"] in {"working", "idle"}
    agent.settled(conversation_id)


def test_a_message_with_wait_and_no_cursor_reads_from_the_start(agent):
    conversation_id = quiet_start(agent)
    response = agent.send(conversation_id, None, query="?wait=5", context={"a": 1})
    assert response.status_code == 202
    body = response.json()
    assert kinds(body["events"]) == [("message", "user"), ("message", "user")]
    assert body["has_more"] is False


def test_a_retry_with_wait_is_a_read_under_the_first_status(agent):
    message = {"id": "pw-3", "sender": "agent", "context": {"a": 1}}
    first = agent.post("", {"message": message})
    conversation_id = first.json()["conversation_id"]
    before = rows()
    again = agent.post("?wait=1", {"message": message})
    assert again.status_code == 201
    assert set(again.json()) == READ_KEYS
    assert again.json()["conversation_id"] == conversation_id
    assert rows() == before


def test_a_bad_cursor_on_a_post_with_wait_is_refused_and_writes_nothing(agent):
    conversation_id = quiet_start(agent)
    other = quiet_start(agent)
    other_cursor = agent.read(other).json()["cursor"]
    before = rows()
    for cursor in ("garbage", other_cursor, "evt_x_1"):
        response = agent.send(conversation_id, "hi", query=f"?wait=1&cursor={cursor}")
        assert_error(response, 400, "invalid_cursor")
        response = agent.start("hi", query=f"?wait=1&cursor={cursor}")
        assert_error(response, 400, "invalid_cursor")
    assert rows() == before
    assert agent.read(conversation_id).json()["status"] == "idle"
