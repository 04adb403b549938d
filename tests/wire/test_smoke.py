"""A plain first message: message(user), state(working), message(company), state(idle)."""

import pytest

from tests.agents import kinds, messages

pytestmark = pytest.mark.django_db(transaction=True)


def test_first_message_is_answered_by_the_company_agent(agent):
    response = agent.start("hello there")
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"conversation_id", "status", "responder"}
    assert body["status"] == "working" and body["responder"] == "agent"
    events = agent.settled(body["conversation_id"])
    assert kinds(events) == [
        ("message", "user"),
        ("state", "working", "agent"),
        ("message", "company"),
        ("state", "idle", "agent"),
    ]
    reply = messages(events)[1]
    assert reply["sender"] == "agent" and reply["text"] == "You said: hello there"
    assert reply["id"].startswith("msg_")
