"""Bad input an adversarial review sent: a clear 400 (or the wire's answer), nothing written.

Each case answered 500 (or crossed an account) before the serializers and receipts checked it.
"""

from __future__ import annotations

import json

import pytest

from tests.agents import PersonalAgent, unique
from tests.wire.wire_support import assert_error, poppy, quiet_start, rows

pytestmark = pytest.mark.django_db(transaction=True)


def raw_message(fields: str) -> bytes:
    """A body with a message whose extra fields are given as raw JSON text."""
    return f'{{"message": {{"id": "{unique("hostile")}", "sender": "agent", {fields}}}}}'.encode()


UNSTORABLE = {
    "text with U+0000": '"text": "a\\u0000b"',
    "text with a lone high surrogate": '"text": "a\\ud800b"',
    "text with a lone low surrogate": '"text": "\\udc00"',
    "data value with U+0000": '"data": {"k": "\\u0000"}',
    "data key with a lone surrogate": '"data": {"\\ud83d": 1}',
    "context value with a lone surrogate": '"context": {"note": ["\\ud800"]}',
    "locale with U+0000": '"context": {"locale": "en\\u0000"}',
    "NaN in data": '"data": {"x": NaN}',
    "Infinity in data": '"data": {"x": Infinity}',
    "-Infinity in context": '"context": {"x": -Infinity}',
    "data nested 970 deep": '"data": {"x": ' + "[" * 969 + "]" * 969 + "}",
    "context nested 100 deep": '"context": {"x": ' + "{" * 99 + "}" * 99 + "}",
}


@pytest.mark.parametrize("fields", UNSTORABLE.values(), ids=UNSTORABLE.keys())
@pytest.mark.parametrize("route", ["start", "message"])
def test_unstorable_json_is_invalid_request_and_writes_nothing(agent, fields, route):
    conversation_id = quiet_start(agent)
    before = rows()
    path = "" if route == "start" else f"/{conversation_id}/messages"
    response = agent.post(path, raw=raw_message(fields))
    assert_error(response, 400, "invalid_request")
    assert rows() == before


def test_a_whole_body_nested_past_the_parser_is_invalid_request(agent):
    before = rows()
    response = agent.post("", raw=b"[" * 200_000)
    assert_error(response, 400, "invalid_request")
    assert rows() == before


def test_nesting_within_the_bound_is_accepted_as_sent(agent):
    data = {"x": json.loads("[" * 60 + "]" * 60)}
    response = agent.start(None, data=data)
    assert response.status_code == 201, response.content
    events = agent.settled(response.json()["conversation_id"])
    assert events[0]["message"]["data"] == data


@pytest.mark.parametrize(
    "data",
    [{"components": "abc"}, {"actions": [1]}, {"components": [{"name": 5}], "actions": "x"}],
)
def test_data_of_any_shape_is_stored_and_the_conversation_keeps_working(agent, data):
    """The wire lets a user message's data be any object: it is kept, and turns and reads
    of the conversation go on working (the desk's side is tested with the desk)."""
    response = agent.start("hello", data=data)
    assert response.status_code == 201, response.content
    conversation_id = response.json()["conversation_id"]
    events = agent.settled(conversation_id)
    assert events[0]["message"]["data"] == data
    assert events[-1]["status"] == "idle"
    assert agent.send(conversation_id, "again").status_code == 202
    assert agent.settled(conversation_id)[-1]["status"] == "idle"


def test_a_message_too_large_once_escaped_for_reads_is_413(agent):
    """Under the body limit as UTF-8, but ~3x over it escaped as reads write it."""
    before = rows()
    text = "\U0001f600" * 200_000  # 800 KB of UTF-8, 2.4 MB as \\ud83d\\ude00 escapes
    body = json.dumps({"message": {"id": "big-1", "sender": "agent", "text": text}})
    response = agent.post("", raw=body.encode())
    assert_error(response, 413, "request_too_large")
    assert rows() == before


def test_every_accepted_message_fits_one_json_read(agent):
    text = "\U0001f600" * 70_000  # 840 KB escaped: accepted, and its read stays within 1 MiB
    body = json.dumps({"message": {"id": "fits-1", "sender": "agent", "data": {"t": text}}})
    response = agent.post("", raw=body.encode())
    assert response.status_code == 201, response.content[:200]
    conversation_id = response.json()["conversation_id"]
    agent.settled(conversation_id)
    read = agent.read(conversation_id)
    assert read.status_code == 200
    assert len(read.content) <= 1024 * 1024
    assert read.json()["events"][0]["message"]["data"]["t"] == text


def test_the_context_is_bounded_and_a_message_past_it_writes_nothing(agent):
    with poppy(MAX_CONTEXT_BYTES=4000):
        conversation_id = quiet_start(agent)
        for n in range(3):
            assert (
                agent.send(conversation_id, None, context={f"k{n}": "x" * 1000}).status_code == 202
            )
        before = rows()
        response = agent.send(conversation_id, "hi", context={"k9": "x" * 1000})
        assert_error(response, 400, "invalid_request")
        assert "context" in response.json()["error_description"]
        assert rows() == before
        # Replacing a field rather than adding one stays within the bound.
        assert agent.send(conversation_id, None, context={"k0": "y" * 1000}).status_code == 202
        # So does a start whose own context is too large: refused, nothing written.
        before = rows()
        assert_error(agent.start(None, context={"big": "x" * 5000}), 400, "invalid_request")
        assert rows() == before


class TestReceiptsDoNotCrossAccounts:
    """A retried first message answers only a caller that may open its conversation."""

    def first(self, signed_in: PersonalAgent) -> tuple[dict, dict]:
        message = {"id": unique("first"), "sender": "agent", "context": {"locale": "en"}}
        response = signed_in.post("", {"message": message})
        assert response.status_code == 201
        return message, response.json()

    def test_the_same_account_gets_the_first_answer(self, acct1):
        message, answer = self.first(acct1)
        before = rows()
        again = acct1.post("", {"message": message})
        assert (again.status_code, again.json()) == (201, answer)
        assert rows() == before

    def test_another_account_gets_not_found(self, acct1):
        message, answer = self.first(acct1)
        acct2 = acct1.signed_in("acct-2", ("poppy:read",))
        before = rows()
        response = acct2.post("", {"message": message})
        body = assert_error(response, 404, "conversation_not_found")
        assert answer["conversation_id"] not in response.content.decode()
        assert set(body) <= {"error", "error_description"}
        assert rows() == before

    def test_signed_out_gets_sign_in_required(self, acct1):
        message, answer = self.first(acct1)
        signed_out = PersonalAgent(acct1.client_id, acct1.user_id)
        before = rows()
        response = signed_out.post("", {"message": message})
        assert_error(response, 403, "sign_in_required")
        assert response["WWW-Authenticate"] == 'DPoP error="sign_in_required"'
        assert answer["conversation_id"] not in response.content.decode()
        assert rows() == before
