"""The desk's search over what was said, private notes, staff, tags and dates, with a snippet
of what matched for each row; staff only."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone

from poppy_django import service
from tests.agents import PersonalAgent
from tests.desk.conftest import DESK, make_user, queued

pytestmark = pytest.mark.django_db(transaction=True)


def rows(client: Client, **query: str) -> str:
    response = client.get(DESK, {"partial": "rows", **query})
    assert response.status_code == 200, response.content
    return response.content.decode()


def row_of(page: str, conversation_id: str) -> str:
    found = re.search(rf'<tr[^>]*data-conversation-id="{conversation_id}".*?</tr>', page, re.S)
    assert found, f"{conversation_id} is not listed"
    return found.group(0)


def test_notes_are_searched_and_their_words_shown(desk: Client, agent: PersonalAgent) -> None:
    noted = queued(agent, "my order is late")
    other = queued(PersonalAgent(), "another question")
    service.add_note(noted, "Customer wants a <b>refund</b> for the broken stove", by="sam")
    page = rows(desk, q="broken stove")
    assert other not in page
    snippet = row_of(page, noted)
    assert "Note by sam:" in snippet and "<mark>broken stove</mark>" in snippet
    assert "&lt;b&gt;refund&lt;/b&gt;" in snippet  # the note's text is escaped


def test_what_was_said_shows_the_words_around_it(desk: Client, agent: PersonalAgent) -> None:
    said = queued(agent, "The zipper on my Trailblazer tent broke after two nights")
    page = rows(desk, q="zipper")
    snippet = row_of(page, said)
    assert "Said:" in snippet and "<mark>zipper</mark>" in snippet.lower()


def test_staff_tags_and_days_are_searched(desk: Client, agent: PersonalAgent) -> None:
    make_user(name="Bob")
    handled = queued(agent, "please help")
    other = queued(PersonalAgent(), "hello there")
    service.human_joined(handled, by="Bob", take_over=True)
    service.tag(other, ["warranty"], by="sam")
    by_staff = rows(desk, q="bob")
    assert handled in by_staff and other not in by_staff
    assert "Handled by:" in row_of(by_staff, handled)
    by_tag = rows(desk, q="Warranty")
    assert other in by_tag and handled not in by_tag
    assert "Tagged:" in row_of(by_tag, other)
    day = timezone.localdate().isoformat()  # the day of their events
    on_the_day = rows(desk, q=day)
    assert handled in on_the_day and other in on_the_day
    assert rows(desk, q="1999-01-01").count("data-conversation-id") == 0


def test_the_tag_filter_and_the_rows_tags(desk: Client, agent: PersonalAgent) -> None:
    tagged = queued(agent, "refund please")
    plain = queued(PersonalAgent(), "hi")
    service.tag(tagged, ["refund", "vip"], by="sam")
    page = desk.get(DESK, {"tag": "refund"}).content.decode()
    assert tagged in page and plain not in page
    assert "data-tag-filter" in page and 'class="poppy-tag poppy-tag-label selected"' in page
    assert 'data-tag="vip"' in row_of(page, tagged)


def test_search_is_for_desk_staff_only(agent: PersonalAgent) -> None:
    noted = queued(agent, "hello")
    service.add_note(noted, "secret plan", by="sam")
    outsider = Client()
    outsider.force_login(make_user(name="nodesk", desk=False))
    assert outsider.get(DESK, {"q": "secret plan"}).status_code == 403


@pytest.mark.parametrize("query", [{"q": "a\x00b"}, {"tag": "\x00"}, {"q": "x" * 501}])
def test_a_search_no_database_can_read_is_a_400_page(desk: Client, query: dict[str, str]) -> None:
    response = desk.get(DESK, query)
    assert response.status_code == 400
    assert desk.get(DESK, {"q": "2026-13-45"}).status_code == 200  # not a date: plain words
