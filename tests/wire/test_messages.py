"""Inbound messages: every malformed body is 400 invalid_request and writes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from poppy_django.models import Conversation
from tests.agents import kinds, messages
from tests.wire.wire_support import ANSWER_KEYS, assert_error, poppy, quiet_start, rows

pytestmark = pytest.mark.django_db(transaction=True)


def good(**changes: Any) -> dict[str, Any]:
    message = {"id": "m-ok", "sender": "agent", "text": "hello"}
    message.update(changes)
    return {"message": {k: v for k, v in message.items() if v is not ...}}


MALFORMED_BODIES: dict[str, bytes] = {
    "not json": b"{this is not json",
    "truncated json": b'{"message": {"id": "a"',
    "not utf-8": b'{"message": "\xff\xfe"}',
    "empty body": b"",
    "whitespace body": b"   ",
    "json null": b"null",
    "json array": b'[{"message": {"id": "a", "sender": "agent", "text": "x"}}]',
    "json string": b'"hello"',
    "json number": b"42",
    "no message": b'{"text": "hello"}',
    "message null": b'{"message": null}',
    "message a string": b'{"message": "hello"}',
    "message a list": b'{"message": ["hello"]}',
    "nested too deeply": b'{"message": {"id": "a", "sender": "agent", "data": '
    + b"[" * 200_000
    + b"}}",
}

MALFORMED_MESSAGES: dict[str, dict[str, Any]] = {
    "no id": good(id=...),
    "id null": good(id=None),
    "id a number": good(id=17),
    "id empty": good(id=""),
    "id with a space": good(id="a b"),
    "id with a dot": good(id="a.b"),
    "id with a colon": good(id="a:b"),
    "id with padding": good(id="abc="),
    "id non-ascii": good(id="é1"),
    "id 257 chars": good(id="a" * 257),
    "no sender": good(sender=...),
    "sender user": good(sender="user"),
    "sender company": good(sender="company"),
    "sender null": good(sender=None),
    "sender upper case": good(sender="Agent"),
    "text a number": good(text=5),
    "text an object": good(text={"t": "x"}),
    "text a list": good(text=["x"]),
    "text a bool": good(text=True),
    "data a string": good(data="x"),
    "data a list": good(data=[1]),
    "data a number": good(data=1),
    "context a string": good(context="en"),
    "context a list": good(context=["en"]),
    "locale a number": good(context={"locale": 5}),
    "locale null": good(context={"locale": None}),
    "time_zone a number": good(context={"time_zone": 1}),
    "time_zone an object": good(context={"time_zone": {"name": "UTC"}}),
    "user_available a string": good(context={"user_available": "true"}),
    "user_available a number": good(context={"user_available": 1}),
    "user_available null": good(context={"user_available": None}),
    "nothing of text/data/context": good(text=...),
    "all null": good(text=None, data=None, context=None),
}


@pytest.fixture
def conversation_id(agent) -> str:
    return quiet_start(agent)


def _post_both(agent, conversation_id, raw: bytes):
    yield "start", agent.post("", raw=raw)
    yield "message", agent.post(f"/{conversation_id}/messages", raw=raw)


@pytest.mark.parametrize("raw", MALFORMED_BODIES.values(), ids=MALFORMED_BODIES.keys())
def test_a_malformed_body_is_invalid_request_and_writes_nothing(agent, conversation_id, raw):
    before = rows()
    for _, response in _post_both(agent, conversation_id, raw):
        assert_error(response, 400, "invalid_request")
    assert rows() == before
    assert agent.read(conversation_id).json()["status"] == "idle"


@pytest.mark.parametrize("body", MALFORMED_MESSAGES.values(), ids=MALFORMED_MESSAGES.keys())
def test_a_malformed_message_is_invalid_request_and_writes_nothing(agent, conversation_id, body):
    before = rows()
    for route, response in _post_both(agent, conversation_id, json.dumps(body).encode()):
        assert_error(response, 400, "invalid_request")
        # Also with ?wait: the error, not a read.
        path = "" if route == "start" else f"/{conversation_id}/messages"
        assert_error(agent.post(path + "?wait=0", body), 400, "invalid_request")
    assert rows() == before
    conversation = Conversation.objects.get(pk=conversation_id)
    assert conversation.context == {"locale": "en-GB"}
    assert conversation.status == "idle"


def test_a_malformed_parent_is_refused_and_writes_nothing(agent, conversation_id):
    before = rows()
    for parent in (5, ["x"], {"id": conversation_id}):
        body = {**good(), "parent_conversation_id": parent}
        assert_error(agent.post("", body), 400, "invalid_request")
    assert rows() == before


@pytest.mark.parametrize("identifier", ["a", "A-z_0-9", "x" * 256, "-", "_"])
def test_ids_of_the_alphabet_up_to_256_chars_are_accepted(agent, identifier):
    response = agent.post("", {"message": {"id": identifier, "sender": "human", "context": {}}})
    assert response.status_code == 201, response.content
    events = agent.read(response.json()["conversation_id"]).json()["events"]
    assert messages(events)[0]["id"] == identifier


def test_unknown_fields_are_ignored_everywhere(agent):
    body = {
        "message": {
            "id": "unk-1",
            "sender": "human",
            "context": {"locale": "de-DE", "extra": {"kept": True}},
            "priority": "high",
            "attachments": [1, 2],
        },
        "future_field": {"x": 1},
        "version": 7,
    }
    response = agent.post("?future=1", body)
    assert response.status_code == 201, response.content
    assert set(response.json()) == ANSWER_KEYS
    conversation_id = response.json()["conversation_id"]
    response = agent.post(
        f"/{conversation_id}/messages",
        {"message": {"id": "unk-2", "sender": "agent", "context": {"x": 1}, "z": 0}, "y": 1},
    )
    assert response.status_code == 202, response.content
    handoff = agent.post(f"/{conversation_id}/handoff", {"reason": "please", "extra": [1]})
    assert handoff.status_code == 202
    close = agent.post(f"/{conversation_id}/close", {"reason": "done"})
    assert close.status_code == 200


def test_a_context_only_message_is_recorded_and_starts_no_turn(agent):
    response = agent.start(None, context={"locale": "en-GB", "custom": {"a": [1]}})
    assert response.status_code == 201
    assert response.json()["status"] == "idle"
    conversation_id = response.json()["conversation_id"]
    response = agent.send(
        conversation_id, None, context={"time_zone": "Europe/London", "user_available": False}
    )
    assert response.status_code == 202
    assert response.json()["status"] == "idle"
    read = agent.read(conversation_id, "?wait=0.3").json()
    assert kinds(read["events"]) == [("message", "user"), ("message", "user")]
    assert read["status"] == "idle"
    sent = messages(read["events"])
    assert sent[0]["context"] == {"locale": "en-GB", "custom": {"a": [1]}}
    assert sent[1]["context"] == {"time_zone": "Europe/London", "user_available": False}
    assert "text" not in sent[1] and "data" not in sent[1]
    merged = Conversation.objects.get(pk=conversation_id).context
    assert merged == {
        "locale": "en-GB",
        "custom": {"a": [1]},
        "time_zone": "Europe/London",
        "user_available": False,
    }


def test_context_is_merged_with_later_values_winning(agent):
    conversation_id = quiet_start(agent, locale="en-GB", time_zone="UTC")
    agent.send(conversation_id, None, context={"locale": "fr-FR"})
    assert Conversation.objects.get(pk=conversation_id).context == {
        "locale": "fr-FR",
        "time_zone": "UTC",
    }


def test_a_message_is_recorded_as_sent(agent):
    conversation_id = quiet_start(agent)
    data = {"cart": [{"sku": "X1", "qty": 2}], "nested": {"ok": None}}
    response = agent.send(conversation_id, None, id="rec-1", sender="human", data=data)
    assert response.status_code == 202
    assert response.json()["status"] == "working"
    events = agent.settled(conversation_id)
    recorded = messages(events)[1]
    assert recorded == {"id": "rec-1", "role": "user", "sender": "human", "data": data}


def test_a_body_over_the_limit_is_413_and_writes_nothing(agent):
    conversation_id = quiet_start(agent)
    before = rows()
    with poppy(MAX_BODY_BYTES=300):
        big = {"message": {"id": "big", "sender": "agent", "text": "x" * 400}}
        for path in ("", f"/{conversation_id}/messages"):
            assert_error(agent.post(path, big), 413, "request_too_large")
        for path in (f"/{conversation_id}/handoff", f"/{conversation_id}/close"):
            assert_error(agent.post(path, {"pad": "x" * 400}), 413, "request_too_large")
        assert rows() == before
        fits = {"message": {"id": "fits", "sender": "agent", "context": {"p": "x" * 200}}}
        assert len(json.dumps(fits)) <= 300
        assert agent.post(f"/{conversation_id}/messages", fits).status_code == 202


def test_the_default_limit_is_one_mebibyte(agent):
    conversation_id = quiet_start(agent)
    before = rows()
    padding = "x" * (1024 * 1024)
    body = {"message": {"id": "huge", "sender": "agent", "context": {"p": padding}}}
    assert_error(agent.post(f"/{conversation_id}/messages", body), 413, "request_too_large")
    assert rows() == before
    near = {"message": {"id": "near", "sender": "agent", "context": {"p": "x" * 1_000_000}}}
    assert agent.post(f"/{conversation_id}/messages", near).status_code == 202
