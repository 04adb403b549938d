"""Teams from Django groups (``POPPY["DESK_TEAMS"]``): a conversation given to a team goes to
its least loaded member there, waits in the team's queue, routes within the team when it
asks again, and counts for the team in the reports."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission
from django.test import Client

from poppy_django import service
from poppy_django.errors import PoppyError
from poppy_django.models import Conversation, DeskEvent, DeskEventKind
from tests.agents import PersonalAgent
from tests.desk.conftest import DESK, act, make_user, on_shift, queued
from tests.wire.wire_support import poppy

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def billing(settings: Any) -> Group:
    """The billing team: Bob and Carol (a group named in DESK_TEAMS); Sam is not in it."""
    settings.POPPY = {**settings.POPPY, "DESK_TEAMS": ["billing", "returns"]}
    group = Group.objects.create(name="billing")
    for name in ("bob", "carol"):
        group.user_set.add(make_user(name=name))
    Group.objects.create(name="ops").user_set.add(make_user(name="olga"))  # not a team
    return group


def test_a_waiting_handoff_given_to_a_team_goes_to_its_least_loaded_member(
    desk: Client, billing: Group
) -> None:
    for name in ("sam", "bob", "carol"):
        on_shift(name)
    earlier = queued(PersonalAgent(), "an earlier question", staff="sam")
    service.assign(earlier, "bob", by="sam")  # Bob has one; Carol none
    conversation_id = queued(PersonalAgent(), "I was charged twice")
    answer = act(desk, conversation_id, "to_team", team="billing", note="A double charge")
    assert answer.status_code == 200, answer.content
    found = Conversation.objects.get(pk=conversation_id)
    assert (found.team, found.assignee) == ("billing", "carol")
    event = DeskEvent.objects.get(conversation_id=conversation_id, kind=DeskEventKind.TO_TEAM)
    assert (event.by, event.other, event.text) == ("sam", "billing", "A double charge")
    # The team's queue holds it; the whole desk's still does.
    team_rows = desk.get(DESK, {"team": "billing", "partial": "rows"}).content.decode()
    assert conversation_id in team_rows and earlier not in team_rows
    page = desk.get(DESK, {"team": "billing"}).content.decode()
    assert 'data-team="billing"' in page and 'data-team="ops"' not in page
    assert conversation_id in desk.get(DESK, {"partial": "rows"}).content.decode()


def test_a_team_conversation_asking_again_routes_within_the_team(billing: Group) -> None:
    for name in ("sam", "bob"):
        on_shift(name)
    customer = PersonalAgent()
    conversation_id = queued(customer, "my invoice", staff="sam")
    service.human_joined(conversation_id, by="sam", take_over=True)
    assert service.to_team(conversation_id, "billing", by="sam") == "bob"
    assert service.get(conversation_id).assignee == "bob"  # Bob holds it now
    service.human_left(conversation_id, by="bob")
    # Sam has nothing and Bob one other: still Bob, the team's.
    other = queued(PersonalAgent(), "another")
    service.assign(other, "bob", by="sam")
    assert customer.post(f"/{conversation_id}/handoff", {}).status_code == 202
    assert service.get(conversation_id).assignee == "bob"


def test_giving_to_a_team_is_refused_when_it_cannot_be_done(billing: Group) -> None:
    on_shift("sam")
    conversation_id = queued(PersonalAgent(), "help")
    for team, code in (("ops", "unknown_team"), ("nope", "unknown_team"), ("", "unknown_team")):
        with pytest.raises(PoppyError) as refused:
            service.to_team(conversation_id, team, by="sam")
        assert refused.value.code == code
    # Held by Sam, no one of billing at the desk: a held conversation needs a person.
    service.human_joined(conversation_id, by="sam", take_over=True)
    with pytest.raises(PoppyError) as refused:
        service.to_team(conversation_id, "billing", by="sam")
    assert refused.value.code == "team_unavailable"
    with pytest.raises(PoppyError) as refused:
        service.to_team(conversation_id, "billing", by="bob")
    assert refused.value.code == "held_by_other"
    found = Conversation.objects.get(pk=conversation_id)
    assert (found.team, found.assignee) == ("", "sam")
    assert not DeskEvent.objects.filter(kind=DeskEventKind.TO_TEAM).exists()


def test_a_team_query_that_is_no_team_is_a_400(desk: Client, billing: Group) -> None:
    assert desk.get(DESK, {"team": "ops"}).status_code == 400
    answer = act(desk, "cnv_none", "to_team", team="billing")
    assert answer.status_code == 404


def test_the_reports_count_a_teams_handoffs(billing: Group) -> None:
    for name in ("sam", "bob"):
        on_shift(name)
    conversation_id = queued(PersonalAgent(), "billing question", staff="sam")
    service.to_team(conversation_id, "billing", by="sam")
    service.human_joined(conversation_id, by="bob")
    lead = make_user(name="lena")
    lead.user_permissions.add(Permission.objects.get(codename="view_desk_reports"))
    client = Client()
    client.force_login(lead)
    with poppy(DESK_TEAMS=["billing"]):
        answer = client.get(f"{DESK}reports.csv", {"of": "team"})
    assert answer.status_code == 200
    rows = {row["team"]: row for row in csv.DictReader(io.StringIO(answer.content.decode()))}
    assert rows["billing"]["handoffs"] == "1" and rows["billing"]["joined"] == "1"
    assert sorted(rows) == ["Whole desk", "billing"]
