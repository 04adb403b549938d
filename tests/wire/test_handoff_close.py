"""Handoff to a person, the company-side service, and close."""

from __future__ import annotations

from typing import Any

import pytest

from poppy_django import service
from poppy_django.conf import DEFAULT_TEXTS
from poppy_django.engine.executors import ThreadExecutor
from poppy_django.errors import PoppyError
from tests.agents import kinds, messages
from tests.desk.conftest import on_shift
from tests.staff import staff_says
from tests.wire.wire_support import ANSWER_KEYS, assert_error, poppy, quiet_start, rows

pytestmark = pytest.mark.django_db(transaction=True)

HERE = "tests.wire.test_handoff_close"
#: Calls the hooks below received, as (hook, kwargs).
CALLS: list[tuple[str, dict[str, Any]]] = []
#: What the request hook answers.
OUTCOME: dict[str, Any] = {"value": "queued"}


def request_hook(**kwargs: Any) -> Any:
    CALLS.append(("request", kwargs))
    return OUTCOME["value"]


def message_hook(**kwargs: Any) -> None:
    CALLS.append(("message", kwargs))


def cancel_hook(**kwargs: Any) -> None:
    CALLS.append(("cancel", kwargs))


def calls(name: str) -> list[dict[str, Any]]:
    return [kwargs for hook, kwargs in CALLS if hook == name]


@pytest.fixture
def hooks():
    """Handoff hooks that record their calls; set ``OUTCOME["value"]`` for the request's answer."""
    CALLS.clear()
    OUTCOME["value"] = "queued"
    with poppy(
        HANDOFF_HOOKS={
            "request": f"{HERE}.request_hook",
            "message": f"{HERE}.message_hook",
            "cancel": f"{HERE}.cancel_hook",
        }
    ):
        yield OUTCOME
    CALLS.clear()


def test_without_a_hook_a_project_with_the_admin_queues_for_the_desk(agent):
    conversation_id, _ = started(agent)
    on_shift("sam")  # someone is there to take it (docs/service.md: presence)
    with poppy(HANDOFF_HOOKS={}):
        response = agent.post(f"/{conversation_id}/handoff")
    assert response.status_code == 202
    assert response.json()["status"] == "queued"
    assert kinds(agent.read(conversation_id).json()["events"])[-1] == ("state", "queued", "agent")


def test_with_the_request_hook_off_the_company_agent_says_no_one_is_available(agent):
    conversation_id, _ = started(agent)
    with poppy(HANDOFF_HOOKS={"request": None}):
        response = agent.post(f"/{conversation_id}/handoff")
    assert response.status_code == 202
    assert response.json() == {
        "conversation_id": conversation_id,
        "status": "idle",
        "responder": "agent",
    }
    events = agent.read(conversation_id).json()["events"]
    assert kinds(events)[-1] == ("message", "company")
    last = messages(events)[-1]
    assert last["text"] == DEFAULT_TEXTS["no_one_available"]
    assert last["sender"] == "agent"
    # The Company Agent keeps the conversation: the next message is answered by a turn.
    agent.send(conversation_id, "ok then")
    assert messages(agent.settled(conversation_id))[-1]["text"] == "You said: ok then"


def started(agent) -> tuple[str, list[dict]]:
    conversation_id = agent.start("hello").json()["conversation_id"]
    return conversation_id, agent.settled(conversation_id)


def test_a_queued_handoff_keeps_the_agent_out(agent, hooks):
    conversation_id, before = started(agent)
    response = agent.post(f"/{conversation_id}/handoff")
    assert response.status_code == 202
    assert response.json() == {
        "conversation_id": conversation_id,
        "status": "queued",
        "responder": "agent",
    }
    assert calls("request") == [{"conversation_id": conversation_id, "initiator": "personal_agent"}]
    events = agent.read(conversation_id).json()["events"]
    assert kinds(events[len(before) :]) == [("state", "queued", "agent")]
    reply = agent.send(conversation_id, "anyone there?", id="q-1")
    assert reply.status_code == 202
    assert reply.json()["status"] == "queued"
    ThreadExecutor.shutdown(wait=True)
    events = agent.read(conversation_id).json()["events"]
    assert kinds(events[len(before) :]) == [("state", "queued", "agent"), ("message", "user")]
    (forwarded,) = calls("message")
    assert forwarded["conversation_id"] == conversation_id
    assert forwarded["message"] == {
        "id": "q-1",
        "role": "user",
        "sender": "agent",
        "text": "anyone there?",
    }


def test_a_joined_handoff_gives_the_conversation_to_a_person(agent, hooks):
    hooks["value"] = "joined"
    conversation_id, before = started(agent)
    response = agent.post(f"/{conversation_id}/handoff")
    assert response.status_code == 202
    assert (response.json()["status"], response.json()["responder"]) == ("idle", "human")
    agent.send(conversation_id, "hi person")
    ThreadExecutor.shutdown(wait=True)
    events = agent.read(conversation_id).json()["events"]
    assert kinds(events[len(before) :]) == [("state", "idle", "human"), ("message", "user")]
    assert len(calls("message")) == 1


def test_an_unavailable_handoff_says_why_and_gives_it_back_to_the_agent(agent, hooks):
    hooks["value"] = {"unavailable": "our desk opens at 9:00"}
    conversation_id, before = started(agent)
    response = agent.post(f"/{conversation_id}/handoff")
    assert response.status_code == 202
    assert (response.json()["status"], response.json()["responder"]) == ("idle", "agent")
    events = agent.read(conversation_id).json()["events"][len(before) :]
    assert kinds(events) == [
        ("state", "queued", "agent"),
        ("message", "company"),
        ("state", "idle", "agent"),
    ]
    assert "our desk opens at 9:00" in events[1]["message"]["text"]
    agent.send(conversation_id, "fine")
    assert messages(agent.settled(conversation_id))[-1]["text"] == "You said: fine"
    assert calls("message") == []


def test_a_second_handoff_while_queued_adds_nothing(agent, hooks):
    conversation_id = quiet_start(agent)
    agent.post(f"/{conversation_id}/handoff")
    before = rows()
    response = agent.post(f"/{conversation_id}/handoff")
    assert response.status_code == 202 and response.json()["status"] == "queued"
    assert rows() == before
    assert len(calls("request")) == 1


def test_the_company_side_service(agent, hooks):
    conversation_id, before = started(agent)
    agent.post(f"/{conversation_id}/handoff")
    service.human_joined(conversation_id, by="sam")
    assert service.get(conversation_id).responder == "human"
    staff_says(conversation_id, "Hi, I am Sam.", by="sam")
    agent.send(conversation_id, "hi Sam")
    service.human_left(conversation_id, by="sam")
    ThreadExecutor.shutdown(wait=True)
    events = agent.read(conversation_id).json()["events"][len(before) :]
    assert kinds(events) == [
        ("state", "queued", "agent"),
        ("state", "idle", "human"),
        ("message", "company"),
        ("message", "user"),
        ("state", "idle", "agent"),
    ]
    staff = events[2]["message"]
    assert (staff["role"], staff["sender"], staff["text"]) == ("company", "human", "Hi, I am Sam.")
    assert staff["id"].startswith("msg_")
    # Back with the agent: a message runs a turn again.
    agent.send(conversation_id, "thanks")
    assert messages(agent.settled(conversation_id))[-1]["text"] == "You said: thanks"
    state = service.get(conversation_id)
    assert (state.status, state.responder) == ("idle", "agent")


def test_when_the_person_leaves_context_only_messages_start_no_turn(agent, hooks):
    conversation_id = quiet_start(agent)
    agent.post(f"/{conversation_id}/handoff")
    service.human_joined(conversation_id, by="sam")
    agent.send(conversation_id, None, context={"user_available": False})
    service.human_left(conversation_id, by="sam")
    ThreadExecutor.shutdown(wait=True)
    events = agent.read(conversation_id).json()["events"]
    assert kinds(events) == [
        ("message", "user"),
        ("state", "queued", "agent"),
        ("state", "idle", "human"),
        ("message", "user"),
        ("state", "idle", "agent"),
    ]


def test_context_updates_reach_the_person_through_the_message_hook(agent, hooks):
    conversation_id = quiet_start(agent)
    agent.post(f"/{conversation_id}/handoff")
    agent.send(conversation_id, None, id="ctx-1", context={"user_available": True})
    (forwarded,) = calls("message")
    assert forwarded["message"]["id"] == "ctx-1"
    assert forwarded["message"]["context"] == {"user_available": True}


def test_the_company_side_reports_an_unavailable_handoff(agent, hooks):
    conversation_id = quiet_start(agent)
    agent.post(f"/{conversation_id}/handoff")
    service.handoff_unavailable(conversation_id, "everyone is at lunch", by="sam")
    events = agent.read(conversation_id).json()["events"]
    assert kinds(events)[1:] == [
        ("state", "queued", "agent"),
        ("message", "company"),
        ("state", "idle", "agent"),
    ]
    assert "everyone is at lunch" in events[2]["message"]["text"]


def test_the_company_agent_hands_off_on_its_own_initiative(agent, hooks):
    conversation_id = quiet_start(agent)
    service.hand_off(conversation_id)
    assert calls("request") == [{"conversation_id": conversation_id, "initiator": "company_agent"}]
    read = agent.read(conversation_id).json()
    assert (read["status"], read["responder"]) == ("queued", "agent")


def test_the_company_requests_the_user(agent):
    conversation_id = quiet_start(agent)
    service.request_user(conversation_id, "We need the card holder to confirm.", by="sam")
    event = agent.read(conversation_id).json()["events"][-1]
    assert event["type"] == "user_requested"
    assert event["reason"] == "We need the card holder to confirm."


def test_the_company_closes(agent):
    conversation_id = quiet_start(agent)
    service.close(conversation_id, by="sam")
    read = agent.read(conversation_id).json()
    assert read["status"] == "closed"
    assert kinds(read["events"])[-1] == ("state", "closed", "agent")
    assert_error(agent.send(conversation_id, "hi"), 409, "conversation_closed")
    with pytest.raises(PoppyError):
        staff_says(conversation_id, "too late")


def test_close_answers_200_closed_and_then_refuses_messages_and_handoffs(agent, hooks):
    conversation_id, before = started(agent)
    response = agent.post(f"/{conversation_id}/close")
    assert response.status_code == 200
    assert set(response.json()) == ANSWER_KEYS
    assert response.json() == {
        "conversation_id": conversation_id,
        "status": "closed",
        "responder": "agent",
    }
    assert calls("cancel") == []  # no handoff was pending
    events = agent.read(conversation_id).json()["events"]
    assert kinds(events[len(before) :]) == [("state", "closed", "agent")]
    snapshot = rows()
    assert_error(agent.send(conversation_id, "hello?"), 409, "conversation_closed")
    assert_error(agent.send(conversation_id, None, context={"a": 1}), 409, "conversation_closed")
    assert_error(agent.post(f"/{conversation_id}/handoff"), 409, "conversation_closed")
    assert_error(agent.send(conversation_id, "x", query="?wait=1"), 409, "conversation_closed")
    assert rows() == snapshot
    # Events stay readable; closing again adds nothing.
    assert agent.read(conversation_id).json()["events"] == events
    again = agent.post(f"/{conversation_id}/close")
    assert (again.status_code, again.json()) == (200, response.json())
    assert rows() == snapshot
    assert calls("request") == []


def test_closing_a_queued_conversation_runs_the_cancel_hook(agent, hooks):
    conversation_id = quiet_start(agent)
    agent.post(f"/{conversation_id}/handoff")
    response = agent.post(f"/{conversation_id}/close")
    assert response.json()["status"] == "closed"
    assert calls("cancel") == [{"conversation_id": conversation_id}]
    agent.post(f"/{conversation_id}/close")
    assert len(calls("cancel")) == 1


def test_closing_during_a_turn_writes_no_reply_after_closed(agent):
    conversation_id = agent.start("#slow").json()["conversation_id"]
    assert agent.post(f"/{conversation_id}/close").status_code == 200
    ThreadExecutor.shutdown(wait=True)
    events = agent.read(conversation_id).json()["events"]
    assert kinds(events)[-1] == ("state", "closed", "agent")
    assert [e for e in events if e["type"] == "state" and e["status"] == "closed"] == events[-1:]


BODIES = [b"", b"{}", b"[]", b'"text"', b"5", b"null", b"true", b'{"reason": "x", "n": [1]}']


@pytest.mark.parametrize("raw", BODIES)
@pytest.mark.parametrize("route", ["handoff", "close"])
def test_handoff_and_close_bodies_may_be_empty_or_any_json(agent, raw, route):
    conversation_id = quiet_start(agent)
    with poppy(HANDOFF_HOOKS={}):
        response = agent.post(f"/{conversation_id}/{route}", raw=raw)
    assert response.status_code == (202 if route == "handoff" else 200), response.content


@pytest.mark.parametrize("raw", [b"{", b"{'a': 1}", b"nope", b'{"a": }', b"\xff"])
@pytest.mark.parametrize("route", ["handoff", "close"])
def test_malformed_handoff_and_close_bodies_are_refused_and_write_nothing(agent, hooks, raw, route):
    conversation_id = quiet_start(agent)
    before = rows()
    assert_error(agent.post(f"/{conversation_id}/{route}", raw=raw), 400, "invalid_request")
    assert rows() == before
    assert CALLS == []
    assert agent.read(conversation_id).json()["status"] == "idle"
