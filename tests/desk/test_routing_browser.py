"""Running the work of a support team in Chromium: two staff and a supervisor, each in a
browser context of their own, against the example project in production mode (uvicorn,
Celery, PostgreSQL, Redis; tests/desk/browser.py), with a short maximum wait (45 s), a
capacity of two and a team, ``billing``.

A missed customer: its assignee warned before the give-back, then the customer on the
*Missed* list with why, and followed up from the desk. Reassignment: a staffer going Away,
then one closing their last desk tab (given nothing more at once, not 90 s later). Routing by
load within capacity, the supervisor never in the rotation, a capacity changed in the admin
(the handoff waiting for room given at once), alerts to the assignee only. A transfer to a
team, routing within it, counted for the team in the reports.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents import company_messages
from tests.desk.browser import DESK, PASSWORD, Site, Staff, handed_off, production_site, screenshot
from tests.waiting import eventually

pytestmark = [pytest.mark.browser, pytest.mark.multiprocess, pytest.mark.timeout(480)]

STAFF = ("alice", "bob")
LEAD = "lena"
MAX_WAIT = 45
ENV = {
    "POPPY_HANDOFF_MAX_WAIT_SECONDS": str(MAX_WAIT),
    "POPPY_DESK_CAPACITY": "2",
    "POPPY_DESK_TEAMS": "billing",
}
BILLING = """
from django.contrib.auth.models import Group, User
Group.objects.get_or_create(name="billing")[0].user_set.add(User.objects.get(username="bob"))
"""
#: After each test: nothing waiting or held, so loads start at nought.
SETTLE = """
from poppy_django import service
from poppy_django.models import Conversation
from poppy_django.store import lifecycle
for c in Conversation.objects.filter(lifecycle.HANDED_TO_PEOPLE.q):
    if lifecycle.QUEUED(c):
        service.close(c.pk, by=c.assignee or "lena")
    else:
        service.human_left(c.pk, by=c.assignee)
print("settled")
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with production_site(Path(tmp_path_factory.mktemp("routing")), env=ENV) as running:
        for name in STAFF:
            running.add_staff(name)
        running.add_staff(LEAD, superuser=True)
        running.shell(BILLING)
        yield running


def shell(site: Site, code: str) -> str:
    return site.shell(code).splitlines()[-1].strip()


def assignee_of(site: Site, conversation_id: str) -> str:
    return shell(
        site, f"from poppy_django import service; print(service.get('{conversation_id}').assignee)"
    )


def signed_in(browser: Any, site: Site, name: str) -> Staff:
    return Staff(browser, site, name).sign_in()


def notified(person: Staff, starting: str) -> list[dict[str, str]]:
    return [n for n in person.notifications() if n["title"].startswith(starting)]


def test_a_missed_customer_is_warned_of_shown_and_followed_up(browser: Any, site: Site) -> None:
    alice = signed_in(browser, site, "alice")
    try:
        conversation_id, agent = handed_off(site, "Can someone call me back about my bill?")
        assert assignee_of(site, conversation_id) == "alice"  # the only one at the desk
        # At 80% of the maximum wait, Alice is warned: it goes back unless she joins.
        alice.page.wait_for_function(
            "(window.__poppyNotifications || []).some(n => n.title.startsWith('Going back soon'))",
            timeout=(MAX_WAIT + 20) * 1000,
        )
        [warning] = notified(alice, "Going back soon: ")
        assert "goes back to the Company Agent in under a minute" in warning["body"], warning
        assert warning["tag"] == f"poppy-going-back-{conversation_id}"
        # Nobody joined: it went back; the customer is on the Missed list with why and when.
        agent.events_until(
            conversation_id,
            lambda events: any(
                "could join in time" in (m.get("text") or "") for m in company_messages(events)
            ),
            timeout=60,
        )
        alice.page.goto(f"{site.base}{DESK}?status=missed")
        alice.live()
        row = f'tr[data-conversation-id="{conversation_id}"]'
        missed = alice.page.text_content(f"{row} [data-missed]") or ""
        assert "Missed: Timed out: no one joined in time (it waited for alice)" in missed, missed
        screenshot(alice.page, "desk-missed-1440")
        # Alice follows the customer up from the desk: her reply joins and reaches them.
        alice.open(conversation_id)
        assert alice.page.text_content('[data-field="missed"]').startswith("Timed out")
        words = "Sorry we missed you earlier: I can help with your bill now."
        alice.page.fill("[data-reply]", words)
        alice.page.click("form[data-form=reply] button[type=submit]")
        alice.settled(1)
        agent.events_until(
            conversation_id,
            lambda events: any(m.get("text") == words for m in company_messages(events)),
        )
        alice.page.wait_for_function(
            "document.querySelector('[data-field=missed]').textContent === '—'", timeout=20_000
        )
        alice.page.goto(f"{site.base}{DESK}?status=missed")
        alice.live()
        assert alice.page.query_selector(f'tr[data-conversation-id="{conversation_id}"]') is None
        assert alice.errors == [], alice.errors
    finally:
        alice.close()
        shell(site, SETTLE)


def test_handoffs_follow_their_assignee_away_and_off_the_desk(browser: Any, site: Site) -> None:
    alice, bob = signed_in(browser, site, "alice"), signed_in(browser, site, "bob")
    try:
        conversation_id, _ = handed_off(site, "My card was charged twice")
        first = assignee_of(site, conversation_id)
        going, staying = (alice, bob) if first == "alice" else (bob, alice)
        # The one it waits for goes Away: it is the other's at once, and they are told.
        going.page.click("[data-presence-toggle]")
        going.page.wait_for_selector("[data-presence][data-away=true]")
        eventually(lambda: assignee_of(site, conversation_id) == staying.username, timeout=20)
        staying.page.wait_for_function(
            "document.querySelector('[data-notice]').textContent.includes('was given to you')",
            timeout=20_000,
        )
        notice = staying.page.text_content("[data-notice]")
        assert f"A conversation waiting for {going.username} was given to you" in notice
        staying.page.wait_for_selector(
            f'tr[data-conversation-id="{conversation_id}"] '
            f'td.poppy-with:has-text("{staying.username}")',
            timeout=20_000,
        )
        going.page.click("[data-presence-toggle]")  # back
        going.page.wait_for_selector("[data-presence][data-away=false]")

        # Back, holding nothing, they are given the next one (the least loaded)...
        theirs, _ = handed_off(site, "Where is my receipt?")
        assert assignee_of(site, theirs) == going.username
        # ...then close their last desk tab: at once they are not available, though their
        # desk was seen well within the 90 s presence window, and at the workers' sweep the
        # one waiting for them goes to the one still there.
        going.close()
        eventually(
            lambda: (
                shell(
                    site,
                    "from poppy_django import service; "
                    f"print(service.available_staff() == ['{staying.username}'])",
                )
                == "True"
            ),
            timeout=20,
        )
        eventually(lambda: assignee_of(site, theirs) == staying.username, timeout=40)
        staying.page.wait_for_selector(
            f'tr[data-conversation-id="{theirs}"] td.poppy-with:has-text("{staying.username}")',
            timeout=20_000,
        )
        # The one who left holds nothing, yet the next is not theirs: it is the one's still
        # there, or, when they are full (two, unless the first timed out meanwhile), it
        # waits for whoever joins first.
        later, _ = handed_off(site, "And my refund?")
        assert assignee_of(site, later) in (staying.username, "")
    finally:
        alice.close()
        bob.close()
        shell(site, SETTLE)


def test_routing_by_load_within_capacity_the_supervisor_out(browser: Any, site: Site) -> None:
    lena = Staff(browser, site, LEAD)
    alice = signed_in(browser, site, "alice")
    bob: Staff | None = None
    try:
        lena.page.goto(f"{site.base}/admin/login/?next={DESK}")
        lena.page.fill("#id_username", LEAD)
        lena.page.fill("#id_password", PASSWORD)
        lena.page.click("input[type=submit]")
        lena.page.wait_for_url(f"**{DESK}")
        lena.live()  # the supervisor watches the desk: never given a handoff
        held = [handed_off(site, f"Alice's question {n}")[0] for n in (1, 2)]
        assert [assignee_of(site, c) for c in held] == ["alice", "alice"]
        for conversation_id in held:
            alice.open(conversation_id)
            alice.page.click("button[data-action=join]")
            alice.settled(1)
        bob = signed_in(browser, site, "bob")
        alice.page.goto(f"{site.base}{DESK}")
        alice.live()
        # Alice holds two (her capacity): the next two go to Bob, the least loaded.
        given = [handed_off(site, f"Bob's question {n}")[0] for n in (1, 2)]
        assert [assignee_of(site, c) for c in given] == ["bob", "bob"]
        # Alerts go to the one it waits for; Alice and Lena see the count only.
        bob.page.wait_for_function(
            "(window.__poppyNotifications || [])"
            ".filter(n => n.title.startsWith('Waiting for you')).length === 2",
            timeout=20_000,
        )
        for person in (alice, lena):
            for conversation_id in given:
                person.told_of(conversation_id)
            assert int(person.page.text_content("[data-waiting-count]") or 0) >= 2
        assert alice.notifications() == [] and lena.notifications() == []
        # Everyone at capacity: the next waits for whoever frees up first.
        full, _ = handed_off(site, "A question no one has room for")
        assert assignee_of(site, full) == ""
        # Lena gives Alice room for one more, in the admin: at the workers' sweep the one
        # waiting for room is hers, and she is told.
        lena.page.goto(f"{site.base}/admin/poppy_django/staffpresence/")
        row = lena.page.locator("#result_list tr", has_text="alice")
        row.locator("input[name$=capacity]").fill("3")
        lena.page.click("input[name=_save]")
        lena.page.wait_for_selector(".messagelist")
        eventually(lambda: assignee_of(site, full) == "alice", timeout=30)
        alice.page.wait_for_function(
            "document.querySelector('[data-notice]').textContent"
            ".includes('A waiting conversation was given to you')",
            timeout=20_000,
        )
        assert lena.errors == [] and alice.errors == [] and bob.errors == []
        for conversation_id in [*given, full]:
            assert assignee_of(site, conversation_id) != LEAD
        screenshot(bob.page, "desk-routing-1440")
    finally:
        for person in (lena, alice, bob):
            if person is not None:
                person.close()
        shell(site, SETTLE)


def test_a_conversation_given_to_a_team_goes_to_its_member(browser: Any, site: Site) -> None:
    alice, bob = signed_in(browser, site, "alice"), signed_in(browser, site, "bob")
    try:
        bob.page.click("[data-presence-toggle]")  # away for a moment: this one is Alice's
        bob.page.wait_for_selector("[data-presence][data-away=true]")
        conversation_id, _ = handed_off(site, "Why was I billed twice for one order?")
        assert assignee_of(site, conversation_id) == "alice"
        bob.page.click("[data-presence-toggle]")
        bob.page.wait_for_selector("[data-presence][data-away=false]")
        alice.open(conversation_id)
        alice.page.click("button[data-action=join]")
        alice.settled(1)
        alice.page.select_option("#poppy-to-team", "billing")
        alice.page.fill("form[data-form=to_team] input[name=note]", "A double charge")
        alice.page.click("form[data-form=to_team] button[type=submit]")
        alice.page.wait_for_function(
            "document.querySelector('[data-field=team]').textContent === 'billing'",
            timeout=20_000,
        )
        # Bob is the one member of billing: it is his, and he is told so.
        assert assignee_of(site, conversation_id) == "bob"
        bob.page.wait_for_function(
            "document.querySelector('[data-notice]').textContent"
            ".includes('gave a conversation to billing')",
            timeout=20_000,
        )
        bob.page.goto(f"{site.base}{DESK}?team=billing")
        bob.live()
        bob.page.wait_for_selector(
            f'tr[data-conversation-id="{conversation_id}"] [data-team="billing"]'
        )
        screenshot(bob.page, "desk-team-queue-1440")
        assert alice.errors == [] and bob.errors == []
        # The team lead's reports count it for billing.
        lena = Staff(browser, site, LEAD)
        try:
            lena.page.goto(f"{site.base}/admin/login/?next={DESK}reports/")
            lena.page.fill("#id_username", LEAD)
            lena.page.fill("#id_password", PASSWORD)
            lena.page.click("input[type=submit]")
            lena.page.wait_for_url(f"**{DESK}reports/")
            row = '[data-report=team] tr[data-row="billing"]'
            assert lena.page.text_content(f"{row} [data-cell=handoffs]") == "1"
            assert lena.page.text_content(f"{row} [data-cell=joined]") == "1"
            assert lena.errors == []
        finally:
            lena.close()
    finally:
        alice.close()
        bob.close()
        shell(site, SETTLE)
