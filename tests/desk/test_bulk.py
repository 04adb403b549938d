"""Bulk actions on the admin's Conversation list (assign, tag, close), each conversation
through the service API: one owner holds, refusals are listed, the live events are sent."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.test import Client

from poppy_django import fanout, service
from poppy_django.models import Conversation
from tests.agents import PersonalAgent
from tests.desk.conftest import make_user, on_shift, queued

pytestmark = pytest.mark.django_db(transaction=True)

CHANGELIST = "/admin/poppy_django/conversation/"


def bulk(client: Client, action: str, ids: list[str], **fields: str):
    """The action as the admin's list posts it: first its page, then with ``apply``."""
    data = {"action": action, ACTION_CHECKBOX_NAME: ids, **fields}
    return client.post(CHANGELIST, data, follow=True)


def said(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_tag_asks_which_tags_then_tags_each(desk: Client, agent: PersonalAgent, published) -> None:
    ids = [queued(agent, "one"), queued(PersonalAgent(), "two")]
    page = bulk(desk, "tag_selected", ids)
    assert page.status_code == 200 and b'name="tags"' in page.content
    done = bulk(desk, "tag_selected", ids, tags="Refund, vip", apply="1")
    assert said(done) == ["2 conversations changed."]
    assert all(service.tags_of(cid) == ["refund", "vip"] for cid in ids)
    news = [d for c, _, d in published if c == fanout.desk_channel() and d.get("kind") == "tagged"]
    assert {d["conversation_id"] for d in news} == set(ids)  # the desks hear of each
    bad = bulk(desk, "tag_selected", ids, tags="no/slash", apply="1")
    assert b"not a tag" in bad.content


def test_close_refuses_what_a_teammate_has_and_says_why(desk: Client, agent: PersonalAgent) -> None:
    mine, theirs = queued(agent, "one"), queued(PersonalAgent(), "two")
    on_shift("bob")
    service.human_joined(theirs, by="bob", take_over=True)
    done = bulk(desk, "close_selected", [mine, theirs], apply="1")
    assert said(done) == [
        "1 conversation changed.",
        f"{theirs}: not changed: bob has this conversation.",
    ]
    assert Conversation.objects.get(pk=mine).status == "closed"
    assert Conversation.objects.get(pk=theirs).status != "closed"


def test_assign_gives_the_waiting_ones(desk: Client, agent: PersonalAgent) -> None:
    on_shift("bob")
    waiting = queued(agent, "one")
    idle = PersonalAgent()
    idle_id = idle.start("hi").json()["conversation_id"]
    idle.settled(idle_id)
    done = bulk(desk, "assign_selected", [waiting, idle_id], to="bob", apply="1")
    assert said(done)[0] == "1 conversation changed."
    assert "not changed" in said(done)[1] and service.get(waiting).assignee == "bob"


def test_the_bulk_actions_are_for_desk_staff(agent: PersonalAgent) -> None:
    target = queued(agent, "one")
    viewer = make_user(name="viewer", desk=False)
    from django.contrib.auth.models import Permission

    viewer.user_permissions.add(Permission.objects.get(codename="view_conversation"))
    client = Client()
    client.force_login(viewer)
    page = client.get(CHANGELIST)
    assert page.status_code == 200 and b"close_selected" not in page.content
    refused = bulk(client, "close_selected", [target], apply="1")
    assert Conversation.objects.get(pk=target).status != "closed"
    assert refused.status_code == 200
