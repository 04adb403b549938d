"""Message ids: a retry answers what the first delivery answered and adds nothing."""

from __future__ import annotations

import pytest

from poppy_django.models import Conversation, MessageReceipt
from tests.agents import PersonalAgent, messages
from tests.wire.wire_support import assert_error, quiet_start, rows

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_retried_first_message_returns_the_conversation_it_started(agent):
    body = {"message": {"id": "first-1", "sender": "agent", "context": {"locale": "en"}}}
    first = agent.post("", body)
    assert first.status_code == 201
    before = rows()
    again = agent.post("", body)
    assert again.status_code == 201
    assert again.json() == first.json()
    assert rows() == before
    assert Conversation.objects.count() == 1


def test_a_retried_first_message_with_a_turn_answers_the_same_and_adds_nothing(agent):
    body = {"message": {"id": "first-2", "sender": "agent", "text": "hello"}}
    first = agent.post("", body)
    conversation_id = first.json()["conversation_id"]
    events = agent.settled(conversation_id)
    before = rows()
    again = agent.post("", body)
    # Exactly the first answer (working), though the conversation is idle by now.
    assert (again.status_code, again.json()) == (201, first.json())
    assert again.json()["status"] == "working"
    assert rows() == before
    assert agent.read(conversation_id).json()["events"] == events


def test_a_retried_message_answers_the_same_and_adds_nothing(agent):
    conversation_id = quiet_start(agent)
    body = {"message": {"id": "retry-1", "sender": "human", "text": "hi", "data": {"a": 1}}}
    first = agent.post(f"/{conversation_id}/messages", body)
    assert first.status_code == 202
    events = agent.settled(conversation_id)
    before = rows()
    again = agent.post(f"/{conversation_id}/messages", body)
    assert (again.status_code, again.json()) == (202, first.json())
    assert rows() == before
    assert agent.read(conversation_id).json()["events"] == events
    assert len([m for m in messages(events) if m["id"] == "retry-1"]) == 1


def test_a_retried_context_only_message_adds_nothing(agent):
    conversation_id = quiet_start(agent)
    body = {"message": {"id": "ctx-1", "sender": "agent", "context": {"time_zone": "UTC"}}}
    first = agent.post(f"/{conversation_id}/messages", body)
    before = rows()
    again = agent.post(f"/{conversation_id}/messages", body)
    assert (again.status_code, again.json()) == (first.status_code, first.json())
    assert rows() == before


def test_unknown_fields_do_not_change_the_fingerprint(agent):
    conversation_id = quiet_start(agent)
    body = {"message": {"id": "fp-1", "sender": "agent", "context": {"locale": "en"}}}
    first = agent.post(f"/{conversation_id}/messages", body)
    before = rows()
    noisy = {
        "message": {**body["message"], "trace": "abc", "priority": 1},
        "client_version": "2.0",
    }
    again = agent.post(f"/{conversation_id}/messages", noisy)
    assert (again.status_code, again.json()) == (first.status_code, first.json())
    assert rows() == before


@pytest.mark.parametrize(
    "change",
    [
        {"text": "other"},
        {"sender": "human"},
        {"data": {"x": 1}},
        {"context": {"locale": "en"}},
    ],
    ids=["text", "sender", "data", "context"],
)
def test_the_same_id_with_other_content_is_a_conflict(agent, change):
    conversation_id = quiet_start(agent)
    original = {"id": "conf-1", "sender": "agent", "text": "original"}
    first = agent.post(f"/{conversation_id}/messages", {"message": original})
    assert first.status_code == 202
    agent.settled(conversation_id)
    before = rows()
    response = agent.post(f"/{conversation_id}/messages", {"message": {**original, **change}})
    assert_error(response, 409, "message_id_conflict")
    assert rows() == before


def test_message_ids_are_unique_per_user_across_conversations(agent):
    one = quiet_start(agent)
    two = quiet_start(agent)
    body = {"message": {"id": "shared-1", "sender": "agent", "context": {"a": 1}}}
    assert agent.post(f"/{one}/messages", body).status_code == 202
    before = rows()
    assert_error(agent.post(f"/{two}/messages", body), 409, "message_id_conflict")
    # A first message may not reuse it either.
    assert_error(agent.post("", body), 409, "message_id_conflict")
    assert rows() == before


def test_a_first_message_id_cannot_be_reused_on_a_conversation(agent):
    body = {"message": {"id": "start-x", "sender": "agent", "context": {"a": 1}}}
    conversation_id = agent.post("", body).json()["conversation_id"]
    before = rows()
    assert_error(agent.post(f"/{conversation_id}/messages", body), 409, "message_id_conflict")
    assert rows() == before


def test_another_user_may_use_the_same_id(agent):
    body = {"message": {"id": "same-id", "sender": "agent", "context": {"a": 1}}}
    mine = agent.post("", body)
    other_user = PersonalAgent(client_id=agent.client_id)
    other_client = PersonalAgent(client_id="https://other.example/pa", user_id=agent.user_id)
    for other in (other_user, other_client):
        theirs = other.post("", body)
        assert theirs.status_code == 201, theirs.content
        assert theirs.json()["conversation_id"] != mine.json()["conversation_id"]
    assert MessageReceipt.objects.filter(message_id="same-id").count() == 3


def test_for_a_first_message_a_different_parent_is_a_conflict(agent):
    parent_a = quiet_start(agent)
    parent_b = quiet_start(agent)
    message = {"id": "direct-1", "sender": "human", "context": {"a": 1}}
    first = agent.post("", {"message": message, "parent_conversation_id": parent_a})
    assert first.status_code == 201, first.content
    before = rows()
    # The same parent: the retry answers the same Direct Conversation.
    again = agent.post("", {"message": message, "parent_conversation_id": parent_a})
    assert (again.status_code, again.json()) == (201, first.json())
    assert rows() == before
    # Another parent, or none: a conflict.
    other = agent.post("", {"message": message, "parent_conversation_id": parent_b})
    assert_error(other, 409, "message_id_conflict")
    assert_error(agent.post("", {"message": message}), 409, "message_id_conflict")
    assert rows() == before


def test_a_retry_after_close_still_answers_the_first_answer(agent):
    conversation_id = quiet_start(agent)
    body = {"message": {"id": "late-1", "sender": "agent", "context": {"x": 1}}}
    first = agent.post(f"/{conversation_id}/messages", body)
    assert agent.post(f"/{conversation_id}/close").status_code == 200
    before = rows()
    again = agent.post(f"/{conversation_id}/messages", body)
    assert (again.status_code, again.json()) == (first.status_code, first.json())
    assert rows() == before
