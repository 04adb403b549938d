"""The desk's side of one owner, assignment, presence, canned replies and private notes,
through the desk's own JSON (as the page calls it), on the service API."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from poppy_django import service
from poppy_django.models import CannedReply, Conversation, DeskEvent
from tests.agents import PersonalAgent, messages
from tests.desk.conftest import DESK, act, desk_url, make_user, new_request_id, on_shift, queued

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def bob() -> Client:
    """A second staff member, on shift, signed in."""
    client = Client()
    client.force_login(on_shift("bob"))
    return client


def events_json(client: Client, conversation_id: str, **query: str) -> dict:
    response = client.get(desk_url(conversation_id, "events.json"), query)
    assert response.status_code == 200, response.content
    return response.json()


def test_join_is_refused_naming_who_has_it_and_take_over_is_recorded(
    desk: Client, bob: Client, agent: PersonalAgent
) -> None:
    conversation_id = queued(agent)
    service.human_joined(conversation_id, by="sam", take_over=True)
    before = Conversation.objects.get(pk=conversation_id).last_seq
    refused = act(bob, conversation_id, "join")
    assert refused.status_code == 409, refused.content
    answer = refused.json()
    assert answer["error"] == "held_by_other" and answer["holder"] == "sam"
    assert answer["error_description"] == "sam has this conversation."
    # The page's state comes with the refusal: it shows who has it without a guess.
    assert answer["conversation"]["assignee"] == "sam"
    assert Conversation.objects.get(pk=conversation_id).last_seq == before

    taken = act(bob, conversation_id, "take_over")
    assert taken.status_code == 200, taken.content
    assert taken.json()["conversation"]["assignee"] == "bob" and taken.json()["desk_events"]
    # Sam's page reads the take-over among the desk's own rows (after what it has).
    news = events_json(desk, conversation_id, after=str(before), desk_after="0")
    [row] = [item for item in news["desk_events"] if item["kind"] == "took_over"]
    assert "bob took over from sam" in row["html"] and row["after_seq"] >= before
    assert news["conversation"]["assignee"] == "bob"


def test_a_reply_over_unread_events_is_refused_with_what_arrived(
    desk: Client, agent: PersonalAgent
) -> None:
    conversation_id = queued(agent)
    act(desk, conversation_id, "join")
    seen = Conversation.objects.get(pk=conversation_id).last_seq
    assert agent.send(conversation_id, "one more thing").status_code == 202
    refused = act(desk, conversation_id, "reply", text="Here you go", seen=seen)
    assert refused.status_code == 409, refused.content
    answer = refused.json()
    assert answer["error"] == "conversation_changed"
    assert [e["message"]["text"] for e in answer["arrived"] if e["type"] == "message"] == [
        "one more thing"
    ]
    assert "Here you go" not in [m.get("text") for m in messages(agent.all_events(conversation_id))]
    accepted = act(desk, conversation_id, "reply", text="Here you go")  # over the newest
    assert accepted.status_code == 200, accepted.content
    for bad in ("evt_x", -1, True, None):
        response = act(desk, conversation_id, "reply", text="x", seen=bad)
        assert response.status_code == 400 and response.json()["error"] == "invalid_request"


def tab(client: Client, key: str) -> str:
    return client.get(DESK, {"status": key, "partial": "rows"}).content.decode()


def test_assign_transfer_and_the_mine_and_unassigned_views(
    desk: Client, bob: Client, agent: PersonalAgent
) -> None:
    conversation_id = queued(agent)  # sam is the one on shift: the round robin gives it to sam
    assert conversation_id in tab(desk, "mine") and conversation_id not in tab(bob, "mine")
    assert act(desk, conversation_id, "unassign").status_code == 200
    assert conversation_id in tab(desk, "unassigned")
    assigned = act(desk, conversation_id, "assign", to="bob", note="A returning customer")
    assert assigned.status_code == 200, assigned.content
    assert conversation_id in tab(bob, "mine") and conversation_id not in tab(desk, "unassigned")
    assert "bob <span" in tab(desk, "waiting")  # "bob (assigned)" in the With column
    page = bob.get(desk_url(conversation_id)).content.decode()
    assert "sam assigned it to bob" in page and "A returning customer" in page
    refused = act(desk, conversation_id, "assign", to="nobody-here")
    assert refused.status_code == 400 and refused.json()["error"] == "unknown_staff"

    assert act(bob, conversation_id, "join").status_code == 200
    moved = act(bob, conversation_id, "transfer", to="sam", note="Over to you")
    assert moved.status_code == 200, moved.content
    assert moved.json()["conversation"]["assignee"] == "sam"
    assert conversation_id in tab(desk, "mine") and conversation_id not in tab(bob, "mine")
    not_holder = act(bob, conversation_id, "transfer", to="sam")
    assert not_holder.status_code == 409
    counts = desk.get(DESK).content.decode()
    assert 'data-filter="mine"' in counts and 'data-filter="unassigned"' in counts


def test_a_private_note_is_on_the_desk_only(desk: Client, agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    request_id = new_request_id()
    note = "Called the warehouse, ships tomorrow"
    added = act(desk, conversation_id, "note", request_id=request_id, text=note)
    assert added.status_code == 200, added.content
    again = act(desk, conversation_id, "note", request_id=request_id, text=note)
    assert again.json()["replayed"] is True  # a retried request is not a second note
    assert DeskEvent.objects.filter(conversation_id=conversation_id, kind="note").count() == 1
    page = desk.get(desk_url(conversation_id)).content.decode()
    assert "poppy-kind-note" in page and note in page and "only staff see this" in page
    assert note not in agent.read(conversation_id).content.decode()
    assert act(desk, conversation_id, "note", text="  ").status_code == 400


def test_presence_is_set_by_the_staff_member_and_renewed_by_an_open_page(desk: Client) -> None:
    url = f"{DESK}presence/"
    away = desk.post(url, json.dumps({"away": True}), content_type="application/json")
    assert away.status_code == 200 and away.json() == {"away": True, "available": False}
    me = desk.get(f"{DESK}alerts.json").json()["me"]
    assert me == {"away": True, "available": False, "teams": []}
    assert "Away: no new handoffs for you" in desk.get(DESK).content.decode()
    back = desk.post(url, json.dumps({"away": False}), content_type="application/json")
    assert back.json() == {"away": False, "available": True}
    for body in ('{"away": "yes"}', "[]", "not json"):
        refused = desk.post(url, body, content_type="application/json")
        assert refused.status_code == 400, body
    assert service.staff_status("sam").away is False


def test_canned_replies_come_filled_for_the_conversation(desk: Client) -> None:
    CannedReply.objects.create(
        shortcut="shipping", title="Shipping", text="Hi {name|there}, order {order} ships today."
    )
    named = PersonalAgent()
    conversation_id = named.start(
        "where is it?", context={"user_name": "Dana", "order_id": "A-7"}
    ).json()["conversation_id"]
    answer = desk.get(desk_url(conversation_id, "canned.json")).json()
    assert answer == {
        "replies": [
            {"shortcut": "shipping", "title": "Shipping", "text": "Hi Dana, order A-7 ships today."}
        ]
    }
    unknown = desk.get(desk_url("cnv_missing", "canned.json"))
    assert unknown.status_code == 404


def test_staff_without_the_permission_reach_none_of_it(agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    client = Client()
    client.force_login(make_user(desk=False))
    assert client.get(desk_url(conversation_id, "canned.json")).status_code == 403
    assert client.post(f"{DESK}presence/", "{}", content_type="application/json").status_code == 403
    for name in ("take_over", "assign", "unassign", "transfer", "note"):
        assert act(client, conversation_id, name, to="sam", text="x").status_code == 403
    assert not DeskEvent.objects.filter(conversation_id=conversation_id).exists()


def test_bad_bodies_are_refused_and_change_nothing(desk: Client, agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    before = Conversation.objects.get(pk=conversation_id)
    bad = [
        ("assign", {}),
        ("assign", {"to": 7}),
        ("assign", {"to": "bob", "note": ["x"]}),
        ("assign", {"to": "sam", "note": "x" * 10_001}),
        ("transfer", {"to": None}),
        ("note", {}),
        ("note", {"text": {"a": 1}}),
        ("reply", {"text": "hello", "seen": None}),
        ("reply", {"text": "hello", "seen": "7"}),
    ]
    for name, body in bad:
        response = act(desk, conversation_id, name, **body)
        assert response.status_code == 400, (name, body, response.content)
        assert response.json()["error"] == "invalid_request", (name, body)
    after = Conversation.objects.get(pk=conversation_id)
    assert (after.last_seq, after.assignee) == (before.last_seq, before.assignee)
    assert not DeskEvent.objects.filter(conversation_id=conversation_id).exists()
