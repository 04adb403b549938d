"""A support team at the desk: two staff in Chromium at once, against the example project in
production mode (uvicorn, Celery, PostgreSQL, Redis; tests/desk/browser.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents import PersonalAgent, company_messages, messages, unique
from tests.desk.browser import (
    DESK,
    Site,
    Staff,
    handed_off,
    production_site,
    screenshot,
    signed_in,
)

pytestmark = [pytest.mark.browser, pytest.mark.multiprocess, pytest.mark.timeout(300)]

STAFF = ("alice", "bob")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with production_site(Path(tmp_path_factory.mktemp("desk"))) as running:
        for name in STAFF:
            running.add_staff(name)
        yield running


@pytest.fixture
def team(browser: Any, site: Site) -> Iterator[tuple[Staff, Staff]]:
    """Alice and Bob, each signed in in a browser of their own, on the queue."""
    with signed_in(browser, site, STAFF) as (alice, bob):
        yield alice, bob


def waiting_count(page: Any) -> int:
    return int(page.get_attribute("[data-alerts]", "data-waiting") or -1)


def test_a_new_handoff_is_announced_on_every_desk_page(
    site: Site, team: tuple[Staff, Staff]
) -> None:
    alice, bob = team
    earlier, _ = handed_off(site, "an earlier question")
    # Alice's tab hears of it before she reloads: a tab told of nothing announces it on reload.
    alice.told_of(earlier)
    bob.open(earlier)  # Bob reads a conversation; Alice watches the queue
    alice.page.reload()
    alice.live()
    for person in team:
        person.page.wait_for_function("document.querySelector('[data-alerts][data-waiting]')")
    before = waiting_count(alice.page)
    assert before >= 1 and re.match(rf"^\({before}\) ", alice.page.title())
    assert alice.notifications() == [] and bob.notifications() == []  # nothing new yet
    # Bob turns the sound on (it chimes once, to say what it will sound like); Alice does not.
    bob.page.check("[data-alerts-sound]")
    bob.page.wait_for_function("window.__poppyTones === 2", timeout=10_000)

    words = "My tent pole snapped, can someone help?"
    conversation_id, _ = handed_off(site, words)
    # The assign hook gave it to one of them: only they are alerted ("Waiting for you"); the
    # other sees the count go up.
    assignee = site.shell(
        f"from poppy_django import service; print(service.get('{conversation_id}').assignee)"
    ).strip()
    assert assignee in STAFF
    for person in team:
        person.told_of(conversation_id)
        person.page.wait_for_function(
            f"document.title.startsWith('({before + 1}) ')", timeout=20_000
        )
        assert person.page.text_content("[data-waiting-count]") == str(before + 1)
        if person.username != assignee:
            assert person.notifications() == []
            continue
        person.page.wait_for_function(
            "(window.__poppyNotifications || []).length === 1", timeout=20_000
        )
        [shown] = person.notifications()
        assert shown["title"].startswith("Waiting for you: user desk-user-"), shown
        assert shown["body"] == words and shown["tag"] == f"poppy-waiting-{conversation_id}"
        assert "is waiting for a person" in person.page.text_content("[data-notice]")
    # The arrival chimed for Bob, who turned the sound on, if it is his; never for Alice.
    bob.page.wait_for_function(
        f"window.__poppyTones === {4 if assignee == 'bob' else 2}", timeout=10_000
    )
    assert alice.tones() == 0

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
    people = [Staff(browser, site, "alice", width=width, height=900) for width in (1440, 1024, 768)]
    try:
        for person in people:
            person.sign_in()  # on shift: the handoff below is queued
        conversation_id, _ = handed_off(site, "Where is my order A-1? It was due on Monday.")
        for person in people:
            width = person.page.viewport_size["width"]
            person.page.reload()
            row = f'tr[data-conversation-id="{conversation_id}"]'
            person.page.wait_for_selector(row)
            assert person.fits(), f"the queue runs off the page at {width} px"
            screenshot(person.page, f"desk-queue-{width}")
            person.open(conversation_id)
            assert person.fits(), f"the conversation runs off the page at {width} px"
            screenshot(person.page, f"desk-conversation-{width}")
            # The shortcuts are documented on the page.
            person.page.keyboard.press("?")
            person.page.wait_for_selector("[data-shortcuts][open]")
            help_text = person.page.text_content("[data-shortcuts]")
            assert "Open the next waiting conversation" in help_text
            person.page.keyboard.press("Escape")
            person.page.wait_for_selector("[data-shortcuts]:not([open])", state="attached")
            assert person.errors == []
    finally:
        for person in people:
            person.close()


def holder_of(person: Staff) -> str:
    """Whom the conversation open on ``person``'s page is with, as the server said."""
    person.page.wait_for_function("document.getElementById('poppy-desk').dataset.holder")
    return str(person.page.get_attribute("#poppy-desk", "data-holder"))


def pair(team: tuple[Staff, Staff], first_name: str) -> tuple[Staff, Staff]:
    first = next(person for person in team if person.username == first_name)
    return first, next(person for person in team if person is not first)


def stale(person: Staff) -> None:
    """The page hears nothing more (its re-reads of the transcript and state fail), as if the
    live update had not reached it yet: what it shows is what it last read."""
    person.context.route("**/events.json*", lambda route: route.abort())


def fresh(person: Staff) -> None:
    person.context.unroute("**/events.json*")


def test_one_person_answers_a_customer(site: Site, team: tuple[Staff, Staff]) -> None:
    words = "My order A-1 never arrived"
    conversation_id, agent = handed_off(site, words)
    alice, bob = team
    alice.open(conversation_id)
    # The round robin gave it to one of them: "first"; the other is "second".
    first, second = pair(team, holder_of(alice))
    if first is not alice:
        first.open(conversation_id)
    assert "Assigned to you" in first.page.text_content("[data-owner]")
    # The first gives it back to whoever joins first (Unassign), the second opens it.
    first.page.click("button[value=unassign]")
    first.settled(1)
    second.open(conversation_id)
    assert not second.page.is_disabled("button[data-action=join]")

    # The first joins while the second's page has not heard of it yet: the second's Join
    # is refused, naming the first, and the page offers Take over.
    stale(second)
    first.page.click("button[data-action=join]")
    first.settled(2)
    first.page.wait_for_function(
        f"document.querySelector('[data-field=assignee]').textContent === '{first.username}'"
    )
    second.page.click("button[data-action=join]")
    second.page.wait_for_selector(".poppy-request[data-state=failed]")
    refusal = second.page.text_content(".poppy-request[data-state=failed]")
    assert f"{first.username} has this conversation" in refusal, refusal
    assert first.username in second.page.text_content("[data-owner]")
    assert second.page.is_visible("button[data-action=take_over]")
    assert second.page.is_disabled("form[data-form=reply] button[type=submit]")
    fresh(second)
    assert agent.all_events(conversation_id)[-1]["responder"] == "human"

    # The second takes it over (after confirming): the first sees it at once, live.
    second.page.click("button[data-action=take_over]")
    second.page.wait_for_function(
        f"document.querySelector('[data-field=assignee]').textContent === '{second.username}'"
    )
    first.page.wait_for_selector("[data-taken]:not([hidden])", timeout=20_000)
    taken = first.page.text_content("[data-taken]")
    assert f"{second.username} took over this conversation from you" in taken, taken
    first.page.wait_for_function(
        "document.querySelector('form[data-form=reply] button[type=submit]').disabled"
    )
    first.page.wait_for_selector(
        f".poppy-desk-event:has-text('{second.username} took over from {first.username}')"
    )
    screenshot(first.page, "desk-taken-over-1440")

    # The second writes a reply; the customer writes again before it is sent, and the
    # second's page has not shown it: the reply is refused, nothing is written, and the
    # page shows what arrived, the reply still in the box.
    reply = "Sorry about that, I am looking into A-1 now."
    second.page.fill("#poppy-reply-text", reply)
    stale(second)
    late = "Also, can you send it to my office instead?"
    assert agent.send(conversation_id, late).status_code == 202
    agent.events_until(
        conversation_id, lambda events: any(m.get("text") == late for m in messages(events))
    )
    second.page.keyboard.press("Control+Enter")
    second.page.wait_for_selector("[data-changed]:not([hidden])")
    assert f"Customer: {late}" in second.page.text_content("[data-changed]")
    assert second.page.input_value("#poppy-reply-text") == reply
    assert not any(m.get("text") == reply for m in messages(agent.all_events(conversation_id)))
    fresh(second)
    second.page.wait_for_selector(f".poppy-kind-user.poppy-arrived:has-text('{late}')")
    # Read: sent again, accepted, and the personal agent gets it.
    second.page.click("form[data-form=reply] button[type=submit]")
    agent.events_until(
        conversation_id,
        lambda events: any(m.get("text") == reply for m in company_messages(events)),
    )
    second.page.wait_for_selector("[data-changed]", state="hidden")


def test_assign_transfer_canned_reply_and_a_private_note(
    site: Site, team: tuple[Staff, Staff]
) -> None:
    site.shell(
        "from poppy_django.models import CannedReply\n"
        "CannedReply.objects.get_or_create(shortcut='shipping', defaults=dict("
        "title='Shipping delay', text='Hi {name|there}, your order {order} left our "
        "warehouse today; it arrives within two days.'))\n"
        "CannedReply.objects.get_or_create(shortcut='thanks', defaults=dict("
        "title='Thanks for waiting', text='Thanks for waiting, {name|there}!'))",
    )
    agent = PersonalAgent(user_id=unique("desk-user"))
    started = agent.at(site.base).post(
        "", agent.message("Where is my order?", context={"user_name": "Dana", "order_id": "A-7"})
    )
    assert started.status_code == 201, started.text
    conversation_id = started.json()["conversation_id"]
    agent = agent.at(site.base)
    agent.events_until(conversation_id, lambda events: len(company_messages(events)) == 1)
    assert agent.post(f"/{conversation_id}/handoff", {}).json()["status"] == "queued"

    alice, bob = team
    alice.open(conversation_id)
    first, second = pair(team, holder_of(alice))
    first.open(conversation_id)
    # Assign it to the teammate, with a note: it is theirs on their queue ("Mine").
    first.page.select_option("#poppy-assign-to", second.username)
    first.page.fill("form[data-form=assign] input[name=note]", "Dana is a returning customer")
    first.page.click("button[value=assign]")
    first.page.wait_for_selector(
        f".poppy-desk-event:has-text('{first.username} assigned it to {second.username}')"
    )
    assert "Dana is a returning customer" in first.page.text_content("[data-transcript]")
    # The teammate is told, wherever they are on the desk.
    given = f"{first.username} assigned a conversation to you"
    second.page.wait_for_function(
        f"(window.__poppyNotifications || []).some(n => n.title === {given!r})", timeout=20_000
    )
    second.page.goto(f"{site.base}{DESK}?status=mine")
    second.live()
    row = f'tr[data-conversation-id="{conversation_id}"]'
    second.page.wait_for_selector(row)
    assert f"{second.username} (assigned)" in second.page.text_content(f"{row} .poppy-with")
    assert "The customer asked for a person" in second.page.text_content(f"{row} .poppy-why")

    # The teammate joins and answers with a canned reply, by keyboard, its placeholders
    # filled for this customer.
    second.page.click(f"{row} a")
    second.page.wait_for_selector("#poppy-desk[data-ready='1']")
    second.page.click("button[data-action=join]")
    second.page.wait_for_function(
        f"document.querySelector('[data-field=assignee]').textContent === '{second.username}'"
    )
    second.page.keyboard.press("r")
    second.page.keyboard.type("/ship")
    second.page.wait_for_selector("[data-canned] li[aria-selected=true][data-shortcut=shipping]")
    second.page.keyboard.press("Enter")
    canned = "Hi Dana, your order A-7 left our warehouse today; it arrives within two days."
    assert second.page.input_value("#poppy-reply-text") == canned
    second.page.keyboard.press("Control+Enter")
    agent.events_until(
        conversation_id,
        lambda events: any(m.get("text") == canned for m in company_messages(events)),
    )

    # A private note: on both desks in its own style, never to the personal agent.
    note = "Checked the warehouse: A-7 ships tomorrow, promised Dana a call back."
    second.page.fill("#poppy-note-text", note)
    second.page.click("form[data-form=note] button[type=submit]")
    for person in team:
        if person is first:
            person.open(conversation_id)
        person.page.wait_for_selector(f".poppy-desk-event.poppy-kind-note:has-text('{note}')")
    events = agent.all_events(conversation_id)
    raw = agent.read(conversation_id).text
    assert note not in raw and "Dana is a returning customer" not in raw
    assert all(note not in str(event) for event in events)

    # Transfer, with a note: the first holds it now; the second can no longer send.
    second.page.select_option("#poppy-assign-to", first.username)
    second.page.fill("form[data-form=assign] input[name=note]", "Over to you for the call back")
    second.page.click("button[value=transfer]")
    first.page.wait_for_function(
        f"document.querySelector('[data-field=assignee]').textContent === '{first.username}'"
    )
    first.page.wait_for_selector(
        f".poppy-desk-event:has-text('{second.username} transferred it to {first.username}')"
    )
    assert not first.page.is_disabled("form[data-form=reply] button[type=submit]")
    second.page.wait_for_function(
        "document.querySelector('form[data-form=reply] button[type=submit]').disabled"
    )
    screenshot(first.page, "desk-notes-1440", full_page=True)
    raw = agent.read(conversation_id).text
    assert "Over to you for the call back" not in raw and first.username not in raw
