"""Direct Conversations: opened from a parent, answered in the parent's agent thread."""

from __future__ import annotations

from typing import Any

import pytest

from example_project.shop.models import Order
from poppy_django import service
from poppy_django.models import AgentThread, Conversation
from tests.agents import PersonalAgent, kinds, messages
from tests.wire.wire_support import ANSWER_KEYS, assert_error, poppy, quiet_start, rows

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]

HERE = "tests.wire.test_direct"
CALLS: list[tuple[str, dict[str, Any]]] = []


def opened_hook(**kwargs: Any) -> None:
    CALLS.append(("opened", kwargs))


def closed_hook(**kwargs: Any) -> None:
    CALLS.append(("closed", kwargs))


def open_direct(agent: PersonalAgent, parent_id: str, text: str | None = None, **message: Any):
    message.setdefault("sender", "human")
    if text is None:
        message.setdefault("context", {"user_available": True})
    return agent.start(text, parent_conversation_id=parent_id, **message)


def test_a_direct_conversation_is_opened_and_named_in_the_parent(agent):
    parent_id = quiet_start(agent)
    response = open_direct(agent, parent_id)
    assert response.status_code == 201
    assert set(response.json()) == ANSWER_KEYS
    direct_id = response.json()["conversation_id"]
    assert direct_id != parent_id and direct_id.startswith("cnv_")
    parent_events = agent.read(parent_id).json()["events"]
    assert parent_events[-1]["type"] == "direct_opened"
    assert parent_events[-1]["conversation_id"] == direct_id
    direct_events = agent.read(direct_id).json()["events"]
    assert kinds(direct_events) == [("message", "user")]
    assert Conversation.objects.get(pk=direct_id).parent_id == parent_id


def test_the_parent_refuses_messages_handoffs_and_a_second_direct(agent):
    parent_id = quiet_start(agent)
    direct_id = open_direct(agent, parent_id).json()["conversation_id"]
    before = rows()
    refusals = [
        agent.send(parent_id, "hello"),
        agent.send(parent_id, None, context={"a": 1}),
        agent.post(f"/{parent_id}/handoff"),
        open_direct(agent, parent_id),
    ]
    for response in refusals:
        body = assert_error(response, 409, "direct_conversation_open")
        assert body["conversation_id"] == direct_id
    assert rows() == before
    # The parent stays readable.
    read = agent.read(parent_id)
    assert read.status_code == 200 and read.json()["events"][-1]["type"] == "direct_opened"


def test_closing_the_direct_adds_direct_closed_to_the_parent(agent):
    parent_id = quiet_start(agent)
    direct_id = open_direct(agent, parent_id).json()["conversation_id"]
    response = agent.post(f"/{direct_id}/close")
    assert response.status_code == 200 and response.json()["status"] == "closed"
    events = agent.read(parent_id).json()["events"]
    assert [e["type"] for e in events[-2:]] == ["direct_opened", "direct_closed"]
    assert events[-1]["conversation_id"] == direct_id
    assert agent.read(parent_id).json()["status"] == "idle"
    # The parent accepts messages again, and a new Direct Conversation.
    assert agent.send(parent_id, None, context={"b": 2}).status_code == 202
    assert open_direct(agent, parent_id).status_code == 201


def test_closing_the_parent_closes_the_direct_first(agent):
    parent_id = quiet_start(agent)
    direct_id = open_direct(agent, parent_id).json()["conversation_id"]
    response = agent.post(f"/{parent_id}/close")
    assert response.status_code == 200 and response.json()["status"] == "closed"
    direct = agent.read(direct_id).json()
    assert direct["status"] == "closed"
    assert kinds(direct["events"])[-1] == ("state", "closed", "agent")
    parent_events = agent.read(parent_id).json()["events"]
    assert [e["type"] for e in parent_events[-2:]] == ["direct_closed", "state"]
    assert parent_events[-1]["status"] == "closed"
    assert_error(agent.send(direct_id, "hi"), 409, "conversation_closed")


def test_the_company_closing_the_parent_closes_the_direct(agent):
    parent_id = quiet_start(agent)
    direct_id = open_direct(agent, parent_id).json()["conversation_id"]
    service.close(parent_id, by="sam")
    assert agent.read(direct_id).json()["status"] == "closed"
    assert agent.read(parent_id).json()["events"][-2]["type"] == "direct_closed"


def test_the_parent_must_be_open(agent):
    parent_id = quiet_start(agent)
    agent.post(f"/{parent_id}/close")
    before = rows()
    assert_error(open_direct(agent, parent_id), 409, "conversation_closed")
    assert rows() == before


@pytest.mark.parametrize("who", ["another user", "another client", "unknown", "invalid"])
def test_the_parent_must_be_the_callers(agent, who):
    parent_id = quiet_start(agent)
    caller = agent
    if who == "another user":
        caller = PersonalAgent(client_id=agent.client_id)
    elif who == "another client":
        caller = PersonalAgent(client_id="https://other.example/pa", user_id=agent.user_id)
    elif who == "unknown":
        parent_id = "cnv_00000000000000000000000000000000"
    else:
        parent_id = "not a valid id!"
    before = rows()
    assert_error(open_direct(caller, parent_id), 404, "conversation_not_found")
    assert rows() == before


def test_a_direct_conversation_cannot_be_a_parent(agent):
    parent_id = quiet_start(agent)
    direct_id = open_direct(agent, parent_id).json()["conversation_id"]
    before = rows()
    assert_error(open_direct(agent, direct_id), 404, "conversation_not_found")
    assert rows() == before


def test_the_direct_answers_in_the_parents_agent_thread(agent):
    parent_id = agent.start("first in parent").json()["conversation_id"]
    agent.settled(parent_id)
    agent.send(parent_id, "second in parent")
    agent.settled(parent_id)
    direct_id = open_direct(agent, parent_id, "#history").json()["conversation_id"]
    events = agent.settled(direct_id)
    reply = messages(events)[-1]
    assert (reply["role"], reply["sender"]) == ("company", "agent")
    assert reply["text"] == "I see 3 messages; the first was: first in parent."
    assert AgentThread.objects.filter(conversation_id=direct_id).count() == 0
    assert AgentThread.objects.filter(conversation_id=parent_id).count() == 1


def test_a_refused_call_in_a_direct_also_asks_in_a_message(agent):
    Order.objects.update_or_create(
        id="A-1", defaults={"account_id": "acct-1", "item": "Shoes", "status": "shipped"}
    )
    parent_id = quiet_start(agent)
    direct_id = open_direct(agent, parent_id, "my orders").json()["conversation_id"]
    events = agent.settled(direct_id)
    assert kinds(events) == [
        ("message", "user"),
        ("state", "working", "agent"),
        ("authorization",),
        ("message", "company"),
        ("state", "idle", "agent"),
    ]
    assert (events[2]["error"], events[2]["scope"]) == ("sign_in_required", "poppy:read")
    assert "poppy:read" in events[3]["message"]["text"]
    # The conversation stays open: the User signs in and continues.
    signed_in = agent.signed_in("acct-1", ("poppy:read",))
    assert signed_in.send(direct_id, "my orders now").status_code == 202
    assert "A-1" in messages(signed_in.settled(direct_id))[-1]["text"]


def test_direct_hooks_run_when_opened_and_closed(agent):
    CALLS.clear()
    with poppy(DIRECT_HOOKS={"opened": f"{HERE}.opened_hook", "closed": f"{HERE}.closed_hook"}):
        parent_id = quiet_start(agent)
        direct_id = open_direct(agent, parent_id).json()["conversation_id"]
        agent.post(f"/{direct_id}/close")
    expected = {"conversation_id": direct_id, "parent_id": parent_id}
    assert [("opened", expected), ("closed", expected)] == CALLS
    CALLS.clear()
