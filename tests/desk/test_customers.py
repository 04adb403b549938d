"""Who the customer is, at the desk: their name (as the canned replies' ``{name}`` says it)
in the queue, the alerts and the page's title, and their other conversations on a
conversation's page."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from poppy_django import service
from poppy_django.models import Conversation
from tests.agents import PersonalAgent
from tests.desk.conftest import DESK, desk_url, queued

pytestmark = pytest.mark.django_db(transaction=True)


def named(agent: PersonalAgent, name: object, text: str = "My tent pole snapped") -> str:
    """A conversation waiting for a person whose personal agent gave ``name`` in the context."""
    on_record = agent.start(text, context={"user_name": name}).json()["conversation_id"]
    agent.settled(on_record)
    response = agent.post(f"/{on_record}/handoff", {})
    assert response.json()["status"] == "queued", response.content
    return on_record


def test_the_customers_name_is_shown_in_the_queue_alerts_and_title(
    desk: Client, agent: PersonalAgent
) -> None:
    service.staff_seen("sam")
    conversation_id = named(agent, "Eli <b>Moreau</b>")
    rows = desk.get(DESK + "?partial=rows").content.decode()
    assert "Eli &lt;b&gt;Moreau&lt;/b&gt;" in rows and "<b>Moreau" not in rows
    assert f"user {agent.user_id[:12]}" not in rows
    alerts = desk.get(f"{DESK}alerts.json").json()
    [waiting] = [item for item in alerts["conversations"] if item["id"] == conversation_id]
    assert waiting["who"] == "Eli <b>Moreau</b>"  # text: the page writes it with textContent
    page = desk.get(desk_url(conversation_id)).content.decode()
    title = re.search(r"<title>(.*?)</title>", page, re.S)
    assert title and title.group(1).startswith("Conversation with Eli &lt;b&gt;Moreau&lt;/b&gt;")


def test_a_customer_without_a_name_is_their_account_or_user(
    desk: Client, acct1: PersonalAgent
) -> None:
    service.staff_seen("sam")
    for unnamed in (None, "", "   ", 42.5, ["Eli"], {"first": "Eli"}):
        conversation_id = named(acct1, unnamed)
        page = desk.get(desk_url(conversation_id)).content.decode()
        assert "<title>Conversation with account acct-1" in page, unnamed
        service.close(conversation_id, by="sam")


def test_a_long_name_is_cut(desk: Client, agent: PersonalAgent) -> None:
    service.staff_seen("sam")
    conversation_id = named(agent, "Eli " + "x" * 300)
    who = desk.get(f"{DESK}alerts.json").json()["conversations"][0]["who"]
    assert who.startswith("Eli xx") and who.endswith("…") and len(who) == 60
    assert conversation_id in desk.get(DESK + "?partial=rows").content.decode()


def test_the_customers_other_conversations_newest_first(desk: Client) -> None:
    """The same User of the same personal agent, and the same account across personal
    agents; another customer's never."""
    signed_in = PersonalAgent(account_id="acct-7")
    first = queued(signed_in, "My first question")
    service.close(first, by="sam")
    second = signed_in.start("A second question").json()["conversation_id"]
    signed_in.settled(second)
    # The same account through another personal agent (another pairwise User).
    elsewhere = PersonalAgent(account_id="acct-7", user_id="another-pairwise-user")
    third = elsewhere.start("From my other assistant").json()["conversation_id"]
    elsewhere.settled(third)
    stranger = PersonalAgent(account_id="acct-8")
    theirs = stranger.start("Not yours").json()["conversation_id"]
    stranger.settled(theirs)
    current = queued(signed_in, "And now this")

    page = desk.get(desk_url(current)).content.decode()
    panel = page.split("data-earlier>")[1].split("</ol>")[0]
    listed = re.findall(r'<li data-conversation-id="(cnv_[0-9a-f]+)"', panel)
    assert listed == [third, second, first]
    assert f'href="../{first}/"' in panel and "“My first question”" in panel
    assert ">closed</span>" in panel and theirs not in page

    # A customer on their first conversation: said so.
    first_page = desk.get(desk_url(theirs)).content.decode()
    assert "None: this is their first." in first_page


def test_the_panel_lists_the_latest_ten(desk: Client, agent: PersonalAgent) -> None:
    ids = []
    for n in range(12):
        started = agent.start(f"question {n}").json()["conversation_id"]
        agent.settled(started)
        ids.append(started)
    page = desk.get(desk_url(ids[-1])).content.decode()
    panel = page.split("data-earlier>")[1].split("</ol>")[0]
    listed = re.findall(r'<li data-conversation-id="(cnv_[0-9a-f]+)"', panel)
    # Started within the same instant or not, newest first: by time, then by id.
    expected = [
        c.id
        for c in Conversation.objects.filter(pk__in=ids[:-1]).order_by("-created_at", "-pk")[:10]
    ]
    assert listed == expected and len(listed) == 10
    assert "Their 10 latest are shown." in page
