"""The team lead's reports page and CSV: handoffs by outcome, first response and resolution
times, CSAT, per staff member and per team, over a chosen period; a permission of its own."""

from __future__ import annotations

import csv
import io
import statistics
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client, override_settings
from django.utils import timezone

from poppy_django import handoff, service
from poppy_django.models import Conversation, HandoffRecord
from tests.agents import PersonalAgent
from tests.desk.conftest import DESK, make_user, on_shift, queued

pytestmark = pytest.mark.django_db(transaction=True)

REPORTS = f"{DESK}reports/"
CSV = f"{DESK}reports.csv"


@pytest.fixture
def lead() -> Client:
    """A team lead: the desk's permission and the reports'."""
    user = make_user(name="lena")
    user.user_permissions.add(Permission.objects.get(codename="view_desk_reports"))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def surveys_on(settings: Any) -> None:
    settings.POPPY = {**settings.POPPY, "CSAT_SURVEY": True, "HANDOFF_MAX_WAIT_SECONDS": 600}


def a_day(settings: Any) -> None:
    """Sam answers one and Bob another (each rated), one is missed for Sam, one is unavailable."""
    on_shift("bob")
    for by, rating in (("sam", 5), ("bob", 3)):
        agent = PersonalAgent()
        conversation_id = queued(agent, "help", staff=by)
        service.human_joined(conversation_id, by=by, take_over=True)
        seen = service.get(conversation_id).last_event_id
        service.post_message(conversation_id, "On it.", by=by, seen=seen)
        service.human_left(conversation_id, by=by)
        agent.settled(conversation_id)
        agent.send(conversation_id, f"{rating} - thanks")
        agent.settled(conversation_id)
    service.set_away("bob", True)  # the next two wait for Sam alone
    missed = queued(PersonalAgent(), "anyone?", staff="sam")
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Conversation.objects.filter(pk=missed).update(handoff_requested_at=an_hour_ago)
    with override_settings(POPPY={**settings.POPPY, "HANDOFF_MAX_WAIT_SECONDS": 60}):
        assert handoff.return_overdue() == [missed]
    quiet = PersonalAgent()
    unavailable = queued(quiet, "hello", staff="sam")
    service.handoff_unavailable(unavailable, "we are at lunch", by="sam")


@pytest.mark.usefixtures("surveys_on")
def test_the_figures_are_those_of_the_records(lead: Client, settings: Any) -> None:
    a_day(settings)
    page = lead.get(REPORTS)
    assert page.status_code == 200
    report = page.context["report"]
    desk = report.desk
    assert desk.handoffs == 4
    assert (desk.outcomes["joined"], desk.outcomes["missed"], desk.outcomes["unavailable"]) == (
        2,
        1,
        1,
    )
    joined = HandoffRecord.objects.filter(outcome="joined")
    first = [(r.first_response_at - r.requested_at).total_seconds() for r in joined]
    assert desk.first_response.median == pytest.approx(statistics.median(first))
    assert (desk.csat.asked, desk.csat.answered, desk.csat.mean) == (2, 2, 4.0)
    assert desk.csat.satisfied == 0.5
    staff = {row.name: row for row in report.staff}
    assert staff["sam"].outcomes["joined"] == 1 and staff["sam"].outcomes["missed"] == 1
    assert staff["sam"].outcomes["unavailable"] == 1 and staff["sam"].csat.mean == 5
    assert staff["bob"].outcomes["joined"] == 1 and staff["bob"].csat.mean == 3
    assert [row.name for row in report.teams] == ["No team"]
    html = page.content.decode()
    assert 'data-figure="handoffs">4<' in html and "chart.umd.min.js" in html
    # What customers said: each answer with its rating, staff member and conversation.
    assert [(s.rating, s.staff, s.comment) for s in report.answers] == [
        (3, "bob", "thanks"),
        (5, "sam", "thanks"),
    ]
    assert html.count("data-answer=") == 2 and "“thanks”" in html
    assert 'id="poppy-charts"' in html


@pytest.mark.usefixtures("surveys_on")
def test_the_csv_per_staff_member_team_and_handoff(lead: Client, settings: Any) -> None:
    a_day(settings)
    today = timezone.localdate().isoformat()
    per_staff = lead.get(CSV, {"from": today, "to": today})
    assert per_staff["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(per_staff.content.decode())))
    by_name = {row["staff"]: row for row in rows}
    assert set(by_name) == {"sam", "bob", "Whole desk"}
    assert (by_name["sam"]["joined"], by_name["sam"]["missed"]) == ("1", "1")
    assert by_name["Whole desk"]["csat_mean"] == "4.00"
    handoffs = list(csv.DictReader(io.StringIO(lead.get(CSV, {"of": "handoffs"}).content.decode())))
    assert sorted(row["outcome"] for row in handoffs) == [
        "joined",
        "joined",
        "missed",
        "unavailable",
    ]
    teams = lead.get(CSV, {"of": "team"}).content.decode()
    assert teams.splitlines()[0].startswith("team,handoffs,")


def test_a_formula_is_never_a_cell_a_spreadsheet_runs(lead: Client, agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    service.handoff_unavailable(conversation_id, '=HYPERLINK("http://x")', by="sam")
    text = lead.get(CSV, {"of": "handoffs"}).content.decode()
    assert "'=HYPERLINK" in text and ",=HYPERLINK" not in text


def test_a_period_out_of_shape_is_refused_and_changes_nothing(lead: Client) -> None:
    for query in (
        {"from": "yesterday"},
        {"from": "2026-02-01", "to": "2026-01-01"},
        {"from": "2020-01-01", "to": "2026-01-01"},
    ):
        page = lead.get(REPORTS, query)
        assert page.status_code == 400 and b"data-problem" in page.content, query
        answer = lead.get(CSV, query)
        assert answer.status_code == 400 and answer.json()["error"] == "invalid_request"
    assert lead.get(CSV, {"of": "everything"}).status_code == 400


def test_the_reports_are_the_team_leads(desk: Client) -> None:
    assert desk.get(REPORTS).status_code == 403
    assert desk.get(CSV).status_code == 403
    assert b"poppy-reports-link" not in desk.get(DESK).content
    boss = Client()
    boss.force_login(make_user(name="root-like", desk=False))
    assert boss.get(REPORTS).status_code == 403
    anonymous = Client().get(REPORTS)
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]
