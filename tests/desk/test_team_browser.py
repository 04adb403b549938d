"""A support team at the desk: two staff in Chromium at once, against the example project in
production mode (uvicorn, Celery, PostgreSQL, Redis; tests/desk/browser.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents import PersonalAgent, company_messages, unique
from tests.desk.browser import (
    CHROMIUM_ARGS,
    DESK,
    Site,
    Staff,
    chromium,
    production_site,
    screenshot,
)

pytestmark = [pytest.mark.browser, pytest.mark.multiprocess, pytest.mark.timeout(300)]

STAFF = ("alice", "bob")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with production_site(Path(tmp_path_factory.mktemp("desk"))) as running:
        for name in STAFF:
            running.add_staff(name)
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    executable = chromium()
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def team(browser: Any, site: Site) -> Iterator[tuple[Staff, Staff]]:
    """Alice and Bob, each signed in in a browser of their own, on the queue."""
    people = [Staff(browser, site, name) for name in STAFF]
    try:
        yield people[0].sign_in(), people[1].sign_in()
        for person in people:
            assert person.errors == [], person.errors
    finally:
        for person in people:
            person.close()


def handed_off(site: Site, text: str, agent: PersonalAgent | None = None) -> tuple[str, Any]:
    """A personal agent says ``text``, gets the Company Agent's answer, asks for a person."""
    agent = (agent or PersonalAgent(user_id=unique("desk-user"))).at(site.base)
    started = agent.post("", agent.message(text))
    assert started.status_code == 201, started.text
    conversation_id = started.json()["conversation_id"]
    agent.events_until(conversation_id, lambda events: len(company_messages(events)) == 1)
    asked = agent.post(f"/{conversation_id}/handoff", {})
    assert asked.json()["status"] == "queued", asked.text
    return conversation_id, agent


def waiting_count(page: Any) -> int:
    return int(page.get_attribute("[data-alerts]", "data-waiting") or -1)


def test_a_new_handoff_is_announced_on_every_desk_page(
    site: Site, team: tuple[Staff, Staff]
) -> None:
    alice, bob = team
    earlier, _ = handed_off(site, "an earlier question")
    bob.open(earlier)  # Bob reads a conversation; Alice watches the queue
    alice.page.reload()
    alice.live()
    for person in team:
        person.page.wait_for_function("document.querySelector('[data-alerts][data-waiting]')")
    before = waiting_count(alice.page)
    assert before >= 1 and re.match(rf"^\({before}\) ", alice.page.title())
    assert alice.notifications() == [] and bob.notifications() == []  # nothing new yet

    words = "My tent pole snapped, can someone help?"
    conversation_id, _ = handed_off(site, words)
    for person in team:
        person.page.wait_for_function(
            "(window.__poppyNotifications || []).length === 1", timeout=20_000
        )
        [shown] = person.notifications()
        assert shown["title"].startswith("Waiting for a person: user desk-user-"), shown
        assert shown["body"] == words and shown["tag"] == f"poppy-waiting-{conversation_id}"
        person.page.wait_for_function(
            f"document.title.startsWith('({before + 1}) ')", timeout=20_000
        )
        assert person.page.text_content("[data-waiting-count]") == str(before + 1)
        assert "is waiting for a person" in person.page.text_content("[data-notice]")

    # Bob goes to the next waiting conversation by keyboard: the one waiting longest.
    bob.page.keyboard.press("q")
    bob.page.wait_for_url(f"**{DESK}")
    bob.live()
    bob.page.wait_for_function("document.querySelector('[data-alerts][data-waiting]')")
    bob.page.keyboard.press("n")
    bob.page.wait_for_url(re.compile(r"/desk/cnv_[0-9a-f]+/$"))
    assert "/desk/cnv_" in bob.page.url
    # Moving between pages announces nothing twice.
    bob.live()
    assert bob.notifications() == []


def test_the_desk_fits_the_page_at_1024_and_768(browser: Any, site: Site) -> None:
    conversation_id, _ = handed_off(site, "Where is my order A-1? It was due on Monday.")
    for width in (1440, 1024, 768):
        person = Staff(browser, site, "alice", width=width, height=900)
        try:
            person.sign_in()
            row = f'tr[data-conversation-id="{conversation_id}"]'
            person.page.wait_for_selector(row)
            assert person.fits(), f"the queue runs off the page at {width} px"
            if width in (1440, 1024):
                screenshot(person.page, f"desk-queue-{width}")
            person.open(conversation_id)
            assert person.fits(), f"the conversation runs off the page at {width} px"
            if width in (1440, 1024):
                screenshot(person.page, f"desk-conversation-{width}")
            # The shortcuts are documented on the page.
            person.page.keyboard.press("?")
            person.page.wait_for_selector("[data-shortcuts][open]")
            assert "Open the next waiting conversation" in person.page.text_content(
                "[data-shortcuts]"
            )
            person.page.keyboard.press("Escape")
            person.page.wait_for_selector("[data-shortcuts]:not([open])", state="attached")
            assert person.errors == []
        finally:
            person.close()
