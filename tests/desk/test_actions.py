"""Desk actions through the service API, and the request-id correlation contract."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from poppy_django import fanout
from poppy_django.models import Conversation, Event
from tests.agents import PersonalAgent, kinds, messages
from tests.desk.conftest import DESK, act, desk_url, new_request_id, queued

pytestmark = pytest.mark.django_db(transaction=True)


def meta_of(conversation_id: str, request_id: str) -> list[Event]:
    return list(Event.objects.filter(conversation_id=conversation_id, meta__request_id=request_id))


def test_a_handoff_appears_on_the_queue_oldest_waiting_first(
    desk: Client, agent: PersonalAgent
) -> None:
    first = queued(agent)
    second = queued(PersonalAgent())
    idle = agent.start("just browsing").json()["conversation_id"]
    agent.settled(idle)
    # The first asked later than the second: the second has waited longest.
    Conversation.objects.filter(pk=first).update(
        handoff_requested_at=timezone.now() + timedelta(seconds=5)
    )
    page = desk.get(f"{DESK}?status=waiting").content.decode()
    assert second in page and first in page and idle not in page
    assert page.index(second) < page.index(first)
    everything = desk.get(DESK).content.decode()
    assert everything.index(first) < everything.index(idle)  # waiting before the rest
    rows = desk.get(f"{DESK}?partial=rows&status=waiting").content.decode()
    assert "<html" not in rows and "waiting for a person" in rows


def test_the_queue_searches_by_conversation_client_and_account(desk: Client) -> None:
    mine = Conversation.objects.create(
        client_id="https://pa.one/x", user_id="u", agent_name="support", account_id="acct-9"
    )
    other = Conversation.objects.create(
        client_id="https://pa.two/y", user_id="u", agent_name="support"
    )
    for query in (mine.id, "pa.one", "acct-9"):
        page = desk.get(DESK, {"q": query}).content.decode()
        assert mine.id in page and other.id not in page, query


def test_join_reply_leave_with_correlation(desk: Client, agent: PersonalAgent, published) -> None:
    conversation_id = queued(agent)
    join_id = new_request_id()
    response = act(desk, conversation_id, "join", join_id)
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["ok"] and answer["request_id"] == join_id and len(answer["events"]) == 1
    assert answer["conversation"]["responder"] == "human"
    assert answer["conversation"]["assignee"] == "sam"
    (joined,) = meta_of(conversation_id, join_id)
    assert joined.payload == {"status": "idle", "responder": "human"}
    assert joined.meta == {"request_id": join_id, "by": "sam"}
    # The desk's live channel carries the request id; the conversation's channel does not.
    desk_nudges = [d for c, t, d in published if c == fanout.desk_channel()]
    assert {
        "conversation_id": conversation_id,
        "seq": joined.seq,
        "type": "state",
        "request_id": join_id,
    } in desk_nudges
    own = [d for c, t, d in published if c == fanout.conversation_channel(conversation_id)]
    assert own and all("request_id" not in d for d in own)

    reply_id = new_request_id()
    response = act(desk, conversation_id, "reply", reply_id, text="Hi, I am Sam from Acme.")
    assert response.status_code == 200, response.content
    (reply,) = meta_of(conversation_id, reply_id)
    assert reply.payload["message"]["sender"] == "human"
    assert reply.payload["message"]["role"] == "company"

    # The personal agent reads the person's message, and nothing staff-only.
    raw = agent.read(conversation_id).content.decode()
    page = json.loads(raw)
    assert messages(page["events"])[-1]["text"] == "Hi, I am Sam from Acme."
    assert messages(page["events"])[-1]["sender"] == "human"
    for secret in (join_id, reply_id, "request_id", '"by"', "sam", "assignee"):
        assert secret not in raw, secret

    # While a person has it, the personal agent's messages are the person's; leaving gives
    # the conversation back to the Company Agent, which answers again.
    agent.send(conversation_id, "are you a person?")
    leave_id = new_request_id()
    response = act(desk, conversation_id, "leave", leave_id)
    assert response.status_code == 200, response.content
    assert response.json()["conversation"]["responder"] == "agent"
    agent.send(conversation_id, "what are your hours?")
    events = agent.events_until(
        conversation_id, lambda events: "Monday" in str(messages(events)[-1].get("text"))
    )
    assert messages(events)[-1]["sender"] == "agent"
    assert "Monday to Friday" in messages(events)[-1]["text"]
    assert Conversation.objects.get(pk=conversation_id).assignee == ""
    (left,) = meta_of(conversation_id, leave_id)
    assert left.payload["responder"] == "agent"


def test_unavailable_says_why_and_gives_it_back(desk: Client, agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    request_id = new_request_id()
    response = act(desk, conversation_id, "unavailable", request_id, reason="we are closed today")
    assert response.status_code == 200, response.content
    caused = meta_of(conversation_id, request_id)
    assert len(caused) >= 2 and len(response.json()["events"]) == len(caused)
    events = agent.read(conversation_id).json()["events"]
    assert "we are closed today" in messages(events)[-1]["text"]
    assert kinds(events)[-1] == ("state", "idle", "agent")
    # Not waiting any more: refused, nothing written.
    again = act(desk, conversation_id, "unavailable", reason="still closed")
    assert again.status_code == 409 and again.json()["error"] == "not_waiting"


def test_request_user_and_close(desk: Client, agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    request_id = new_request_id()
    response = act(desk, conversation_id, "request_user", request_id, reason="to confirm a refund")
    assert response.status_code == 200, response.content
    events = agent.read(conversation_id).json()["events"]
    assert events[-1]["type"] == "user_requested" and events[-1]["reason"] == "to confirm a refund"
    assert request_id not in json.dumps(events)

    close_id = new_request_id()
    response = act(desk, conversation_id, "close", close_id)
    assert response.status_code == 200, response.content
    assert response.json()["conversation"]["closed"] is True
    assert meta_of(conversation_id, close_id)
    assert agent.read(conversation_id).json()["status"] == "closed"
    refused = act(desk, conversation_id, "join")
    assert refused.status_code == 409 and refused.json()["error"] == "conversation_closed"


def test_a_retried_request_id_is_answered_not_redone(desk: Client, agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    act(desk, conversation_id, "join")
    request_id = new_request_id()
    first = act(desk, conversation_id, "reply", request_id, text="once").json()
    second = act(desk, conversation_id, "reply", request_id, text="once").json()
    assert second["replayed"] is True and second["events"] == first["events"]
    texts = [m.get("text") for m in messages(agent.read(conversation_id).json()["events"])]
    assert texts.count("once") == 1


def test_an_action_that_changes_nothing_answers_no_events(
    desk: Client, agent: PersonalAgent
) -> None:
    conversation_id = queued(agent)
    act(desk, conversation_id, "join")
    again = act(desk, conversation_id, "join")
    assert again.status_code == 200 and again.json()["events"] == []


@pytest.mark.parametrize(
    ("name", "body", "status", "error"),
    [
        ("join", {"request_id": "short"}, 400, "invalid_request"),
        ("join", {"request_id": "bad id with spaces"}, 400, "invalid_request"),
        ("join", {}, 400, "invalid_request"),
        ("reply", {"request_id": "r-12345678", "text": "   "}, 400, "invalid_request"),
        ("unavailable", {"request_id": "r-12345678"}, 400, "invalid_request"),
        ("request_user", {"request_id": "r-12345678", "reason": ""}, 400, "invalid_request"),
        ("dance", {"request_id": "r-12345678"}, 404, "not_found"),
    ],
)
def test_bad_actions_are_refused_and_change_nothing(
    desk: Client, name, body, status, error
) -> None:
    conversation = Conversation.objects.create(client_id="c", user_id="u", agent_name="support")
    response = desk.post(
        desk_url(conversation.id, f"action/{name}/"),
        data=json.dumps(body),
        content_type="application/json",
    )
    assert response.status_code == status and response.json()["error"] == error
    conversation.refresh_from_db()
    assert conversation.last_seq == 0


def test_not_json_is_refused(desk: Client) -> None:
    conversation = Conversation.objects.create(client_id="c", user_id="u", agent_name="support")
    response = desk.post(
        desk_url(conversation.id, "action/join/"), data="nope", content_type="text/plain"
    )
    assert response.status_code == 400


def test_an_unknown_conversation(desk: Client) -> None:
    assert desk.get(desk_url("cnv_nope")).status_code == 404
    assert desk.get(desk_url("cnv_nope", "events.json")).status_code == 404
    response = act(desk, "cnv_nope", "join")
    assert response.status_code == 404 and response.json()["error"] == "conversation_not_found"


def test_the_transcript_json_fills_gaps_after_a_seq(desk: Client, agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    request_id = new_request_id()
    act(desk, conversation_id, "join", request_id)
    last = Conversation.objects.get(pk=conversation_id).last_seq
    everything = desk.get(desk_url(conversation_id, "events.json")).json()
    assert [e["seq"] for e in everything["events"]] == list(range(1, last + 1))
    tail = desk.get(desk_url(conversation_id, "events.json"), {"after": last - 1}).json()
    (event,) = tail["events"]
    assert event["seq"] == last and event["request_id"] == request_id
    assert "With a person" in event["html"] and "sam" in event["html"]
    assert tail["conversation"]["assignee"] == "sam" and tail["has_more"] is False
    assert desk.get(desk_url(conversation_id, "events.json"), {"after": "x"}).status_code == 400


def test_an_event_link_highlights_it(desk: Client, agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    event_id = agent.read(conversation_id).json()["events"][0]["id"]
    page = desk.get(desk_url(conversation_id), {"event": event_id}).content.decode()
    row = page[page.index(f'id="{event_id}"') :][:200]
    assert "poppy-highlight" in row
    assert page.count("poppy-highlight") == 1 + page.count(".poppy-highlight")  # one row
