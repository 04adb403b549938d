"""What a staff member's conversation page tells their colleagues (viewing, typing): passed
on in the signed-in staff member's name on the conversation's desk channel, never stored,
and bad input refused with nothing sent."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from poppy_django.fanout import conversation_channel
from tests.agents import PersonalAgent
from tests.desk.conftest import desk_url

pytestmark = pytest.mark.django_db(transaction=True)


def tell(client: Client, conversation_id: str, body: Any) -> Any:
    return client.post(
        desk_url(conversation_id, "activity/"),
        data=body if isinstance(body, str) else json.dumps(body),
        content_type="application/json",
    )


def activity(published: list[tuple[str, str, dict]]) -> list[tuple[str, dict]]:
    return [(channel, data) for channel, kind, data in published if kind == "poppy.activity"]


def test_typing_is_passed_on_in_the_staff_members_name(
    desk: Client, agent: PersonalAgent, published: list[tuple[str, str, dict]]
) -> None:
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    published.clear()
    answer = tell(desk, conversation_id, {"doing": "typing", "by": "mallory"})
    assert answer.status_code == 200 and answer.json() == {"doing": "typing"}
    assert tell(desk, conversation_id, {"doing": "viewing", "hello": True}).status_code == 200
    assert activity(published) == [
        (conversation_channel(conversation_id), {"by": "sam", "doing": "typing", "hello": False}),
        (conversation_channel(conversation_id), {"by": "sam", "doing": "viewing", "hello": True}),
    ]
    # Only staff's streams read the conversation's desk channel; the wire never carries it.
    events = agent.all_events(conversation_id)
    assert "typing" not in json.dumps(events)


@pytest.mark.parametrize(
    "body",
    [
        {"doing": "dancing"},
        {},
        {"doing": ["typing"]},
        {"doing": "typing", "hello": "yes"},
        "not json",
        '["typing"]',
    ],
)
def test_bad_input_is_refused_and_nothing_is_sent(
    desk: Client, agent: PersonalAgent, published: list[tuple[str, str, dict]], body: Any
) -> None:
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    published.clear()
    answer = tell(desk, conversation_id, body)
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_request"
    assert activity(published) == []


def test_only_desk_staff_tell_and_only_of_a_conversation(
    agent: PersonalAgent, published: list[tuple[str, str, dict]]
) -> None:
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    outsider = Client()
    outsider.force_login(User.objects.create_user("eve", password=None, is_staff=True))
    assert tell(outsider, conversation_id, {"doing": "typing"}).status_code == 403
    staff = Client()
    staff.force_login(User.objects.create_superuser("root-colleagues", password=None))
    assert tell(staff, "cnv_doesnotexist", {"doing": "typing"}).status_code == 404
    assert staff.get(desk_url(conversation_id, "activity/")).status_code == 405
    assert activity(published) == []
