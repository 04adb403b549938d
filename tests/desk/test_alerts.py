"""What every desk page alerts on (alerts.json), what the queue says of each conversation,
search by what was said, and the developer's text kept to superusers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from poppy_django import service
from tests.agents import PersonalAgent
from tests.desk.conftest import DESK, desk_url, queued

pytestmark = pytest.mark.django_db(transaction=True)


def alerts(client: Client) -> dict:
    response = client.get(f"{DESK}alerts.json")
    assert response.status_code == 200, response.content
    return response.json()


def test_alerts_count_the_waiting_longest_first_with_what_the_customer_said(
    desk: Client,
) -> None:
    assert alerts(desk) == {
        # Reading it renews the reader's presence; no POPPY["DESK_TEAMS"]: in no team.
        "me": {"away": False, "available": True, "teams": []},
        "office_open": True,  # no OFFICE_HOURS: always
        "waiting": 0,
        "conversations": [],
    }
    first = queued(PersonalAgent(account_id="acct-7"), "Where is my parcel?")
    second = queued(PersonalAgent(), "Can I return boots I wore once?")
    answer = alerts(desk)
    assert answer["waiting"] == 2
    assert [item["id"] for item in answer["conversations"]] == [first, second]
    shown = answer["conversations"][0]
    # The customer's words, not the Company Agent's echo; staff's name for whom it is with.
    assert shown["said"] == "Where is my parcel?" and shown["who"] == "account acct-7"
    assert shown["url"] == desk_url(first) and shown["since"]
    assert shown["assignee"] == "sam"  # the assign hook's choice: the one on shift
    assert shown["team"] == "" and shown["warn_in"] < shown["due_in"] <= 600
    service.human_joined(first, by="sam")
    answer = alerts(desk)
    assert answer["waiting"] == 1 and [i["id"] for i in answer["conversations"]] == [second]


def search(client: Client, text: str) -> str:
    return client.get(DESK, {"q": text, "partial": "rows"}).content.decode()


def test_search_finds_a_conversation_by_what_was_said(desk: Client) -> None:
    tent = queued(PersonalAgent(), "The pole of my tent snapped in the wind")
    boots = queued(PersonalAgent(), "Do the hiking boots come in size 46?")
    found = search(desk, "tent")
    assert tent in found and boots not in found
    found = search(desk, "hiking boots")
    assert boots in found and tent not in found
    assert tent not in search(desk, "kayak") and boots not in search(desk, "kayak")
    if connection.vendor == "postgresql":
        # Full-text: words, stemmed ("snapping" finds "snapped"), in any order.
        assert tent in search(desk, "snapping poles")
        assert boots in search(desk, "boots hiking")
    # The ids still find it.
    assert tent in search(desk, tent[-10:])


def test_developer_text_is_for_superusers_only(desk: Client, agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    staff_page = desk.get(desk_url(conversation_id)).content.decode()
    assert "data-diagnostics" not in staff_page and "data-developer" not in staff_page
    assert "on the wire" not in staff_page
    developer = Client()
    developer.force_login(User.objects.create_superuser("root-dev", password=None))
    developer_page = developer.get(desk_url(conversation_id)).content.decode()
    assert "data-diagnostics" in developer_page and "data-developer" in developer_page


def test_every_desk_page_has_the_alerts_bar_and_the_shortcuts(
    desk: Client, agent: PersonalAgent
) -> None:
    conversation_id = queued(agent)
    for url in (DESK, desk_url(conversation_id)):
        page = desk.get(url).content.decode()
        assert f'data-alerts-url="{DESK}alerts.json"' in page
        assert "desk-alerts.js" in page and "desk-keys.js" in page
        assert "data-shortcuts" in page and "<kbd>n</kbd>" in page
        # The desk has the page's width: no admin model list beside it.
        assert 'id="nav-sidebar"' not in page


def test_every_desk_page_says_when_it_is_outside_office_hours(desk: Client, settings) -> None:
    from django.utils import timezone

    today = timezone.now().date()
    closed = [str(today), str(today + timedelta(days=1))]  # whatever the hour of the run
    settings.POPPY = {
        **settings.POPPY,
        "OFFICE_HOURS": {"HOURS": {"mon-sun": "00:00-24:00"}, "CLOSED_DATES": closed},
    }
    assert alerts(desk)["office_open"] is False
    settings.POPPY = {**settings.POPPY, "OFFICE_HOURS": None}
    assert alerts(desk)["office_open"] is True
