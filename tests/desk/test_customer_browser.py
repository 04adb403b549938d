"""Who the customer is, and working beside a colleague, in Chromium: two staff, each in a
browser context of their own, against the example project in production mode (uvicorn,
Celery, PostgreSQL, Redis; tests/desk/browser.py).

The customer's name in the queue, the alerts and the title, their earlier conversations;
who else views a conversation and who is typing a reply, seen by the other staff member;
the page following ownership back; single-key shortcuts never taking a reply's first words
while a page loads or leaves; the queue and a conversation at 390 px with no badge broken
inside a word.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents import PersonalAgent, company_messages, messages, unique
from tests.desk.browser import DESK, Site, Staff, production_site, screenshot, signed_in
from tests.waiting import eventually

pytestmark = [pytest.mark.browser, pytest.mark.multiprocess, pytest.mark.timeout(420)]

STAFF = ("alice", "bob")
NAME = "Eli Moreau"
#: Every word of every badge on the page, each as the rectangles it is drawn in: a word
#: broken across two lines is drawn in two.
BADGE_WORDS = """
() => {
  const words = [];
  document.querySelectorAll(".poppy-badge").forEach((badge) => {
    if (!badge.offsetParent) { return; }  // not shown at this width
    const walker = document.createTreeWalker(badge, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.textContent;
      for (const found of text.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, found.index);
        range.setEnd(node, found.index + found[0].length);
        const lines = new Set(Array.from(range.getClientRects(), (r) => Math.round(r.top)));
        words.push({ word: found[0], badge: badge.textContent.trim(), lines: lines.size });
      }
    }
  });
  return words;
}
"""


#: What runs off the page sideways (a failure's message).
OFF_THE_PAGE = """
() => Array.from(document.querySelectorAll("body *"))
  .filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)
  .slice(0, 12)
  .map((e) => e.tagName + "." + e.className + " " + Math.round(e.getBoundingClientRect().right))
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with production_site(Path(tmp_path_factory.mktemp("customer"))) as running:
        for name in STAFF:
            running.add_staff(name)
        yield running


@pytest.fixture
def team(browser: Any, site: Site) -> Iterator[tuple[Staff, Staff]]:
    """Alice and Bob, each signed in in a browser of their own, on the queue."""
    with signed_in(browser, site, STAFF) as (alice, bob):
        yield alice, bob


def started(site: Site, agent: PersonalAgent, text: str, **context: Any) -> str:
    """A conversation ``agent`` starts (its context holding ``context``), answered."""
    body = agent.message(text, context=context) if context else agent.message(text)
    answer = agent.post("", body)
    assert answer.status_code == 201, answer.text
    conversation_id = answer.json()["conversation_id"]
    agent.events_until(conversation_id, lambda events: len(company_messages(events)) == 1)
    return conversation_id


def asks_for_a_person(agent: PersonalAgent, conversation_id: str) -> None:
    asked = agent.post(f"/{conversation_id}/handoff", {})
    assert asked.json()["status"] == "queued", asked.text


def assignee_of(site: Site, conversation_id: str) -> str:
    code = f"from poppy_django import service; print(service.get('{conversation_id}').assignee)"
    return site.shell(code).strip()


def titled(page: Any, name: str) -> bool:
    """The tab's title names the customer (after the count of those waiting, if any)."""
    return bool(re.match(rf"^(\(\d+\) )?Conversation with {re.escape(name)} \|", page.title()))


def reads(agent: PersonalAgent, conversation_id: str, text: str) -> None:
    """The personal agent reads ``text`` from a person."""
    agent.events_until(
        conversation_id,
        lambda events: any(
            m.get("text") == text and m.get("sender") == "human" for m in messages(events)
        ),
    )


def test_the_customer_is_named_and_their_earlier_conversations_listed(
    site: Site, team: tuple[Staff, Staff]
) -> None:
    alice, _ = team
    agent = PersonalAgent(user_id=unique("eli")).at(site.base)
    earlier = started(site, agent, "Do you ship tents to Norway?", user_name=NAME)
    conversation_id = started(site, agent, "My tent pole snapped", user_name=NAME)
    asks_for_a_person(agent, conversation_id)

    # The queue's row, the alert and the tab's title name the customer.
    row = f'tr[data-conversation-id="{conversation_id}"]'
    alice.page.wait_for_selector(f"{row} .poppy-who-link:text-is('{NAME}')", timeout=20_000)
    alice.page.wait_for_function(
        "n => (window.__poppyNotifications || []).some(s => s.title.endsWith(': ' + n))",
        arg=NAME,
        timeout=20_000,
    )
    alice.page.click(f"{row} .poppy-who-link")
    alice.page.wait_for_selector("#poppy-desk[data-ready='1']")
    assert titled(alice.page, NAME)
    assert alice.page.text_content('[data-field="customer"]') == NAME
    # The transcript in staff's words.
    first = alice.page.locator(".poppy-kind-user .poppy-who").first
    assert first.text_content() == "Customer"
    # Their earlier conversation, linked.
    panel = alice.page.locator("[data-earlier] li[data-conversation-id]")
    assert panel.evaluate_all("items => items.map(i => i.dataset.conversationId)") == [earlier]
    assert "Do you ship tents to Norway?" in panel.first.text_content()
    screenshot(alice.page, "desk-customer-1440")
    panel.first.locator("a").click()
    alice.page.wait_for_url(f"**{DESK}{earlier}/")
    alice.page.wait_for_selector("#poppy-desk[data-ready='1']")
    assert titled(alice.page, NAME)


def test_colleagues_see_who_views_and_who_types_and_ownership_comes_back(
    site: Site, team: tuple[Staff, Staff]
) -> None:
    agent = PersonalAgent(user_id=unique("kim")).at(site.base)
    conversation_id = started(site, agent, "Can I change my delivery address?", user_name="Kim")
    asks_for_a_person(agent, conversation_id)
    # The one the round robin gave it to answers; the other watches.
    alice, bob = team if assignee_of(site, conversation_id) != "bob" else team[::-1]
    alice.open(conversation_id)
    bob.open(conversation_id)
    # Each sees the other there (the later page said hello; the earlier answered).
    alice.page.wait_for_selector(
        f'[data-colleagues][data-viewing="{bob.username}"]', timeout=20_000
    )
    bob.page.wait_for_selector(
        f'[data-colleagues][data-viewing="{alice.username}"]', timeout=20_000
    )

    # Alice (the one it waits for) joins and starts a reply: Bob sees her typing.
    alice.page.click("button[data-action=join]")
    alice.settled(1)
    draft = "Yes: which address should it go to?"
    alice.page.click("[data-reply]")
    alice.page.keyboard.type(draft)
    bob.page.wait_for_selector(f'[data-colleagues][data-typing="{alice.username}"]', timeout=20_000)
    typing = bob.page.text_content("[data-colleagues] [data-kind=typing]")
    assert typing == f"{alice.username} is typing a reply…"

    # Bob takes over: Alice's page says her replies are no longer sent; her draft stays.
    bob.page.click("button[data-action=take_over]")
    bob.settled(1)
    alice.page.wait_for_selector("[data-taken]:not([hidden])", timeout=20_000)
    assert "your replies are no longer sent" in alice.page.text_content("[data-taken]")
    assert alice.page.is_disabled("form[data-form=reply] button[type=submit]")
    # Bob gives it back to her: the notice goes, the draft is hers to send.
    bob.page.select_option("#poppy-assign-to", alice.username)
    bob.page.click("form[data-form=assign] button[value=transfer]")
    bob.settled(2)
    alice.page.wait_for_selector("[data-taken]", state="hidden", timeout=20_000)
    alice.page.wait_for_selector(
        "form[data-form=reply] button[type=submit]:not([disabled])", timeout=20_000
    )
    assert alice.page.input_value("[data-reply]") == draft
    screenshot(bob.page, "desk-colleagues-1440")
    alice.page.click("form[data-form=reply] button[type=submit]")
    reads(agent, conversation_id, draft)
    # Sent: Bob no longer sees her typing, only viewing.
    bob.page.wait_for_selector(
        f'[data-colleagues][data-viewing="{alice.username}"]', timeout=20_000
    )


def test_shortcuts_never_take_a_replys_first_words(site: Site, team: tuple[Staff, Staff]) -> None:
    agent = PersonalAgent(user_id=unique("ann")).at(site.base)
    conversation_id = started(site, agent, "Is the stove still under warranty?")
    asks_for_a_person(agent, conversation_id)
    # The one the round robin gave it to answers it (call them Bob).
    bob = team[0] if assignee_of(site, conversation_id) == team[0].username else team[1]
    page = bob.page

    # The page is still loading (its main script not yet served) when Bob starts typing.
    held: list[Any] = []
    page.route("**/static/poppy_django/desk/desk.js", lambda route: held.append(route))
    page.goto(f"{site.base}{DESK}{conversation_id}/", wait_until="commit")
    page.wait_for_selector("[data-reply]", state="attached")

    def listening() -> bool:
        """The shortcuts' script runs: its button opens the help (closed again at once)."""
        page.click("[data-shortcuts-open]")
        shown = page.evaluate("document.querySelector('[data-shortcuts]').open")
        if shown:
            page.keyboard.press("Escape")
            page.wait_for_selector("[data-shortcuts]:not([open])", state="attached")
        return bool(shown)

    eventually(listening, timeout=20)
    page.evaluate("document.activeElement && document.activeElement.blur()")
    words = "Sorry for the wait, I am here now"
    page.keyboard.type(words)
    # No key was a shortcut: nothing went into the reply box, no other page opened.
    assert page.input_value("[data-reply]") == ""
    assert page.url.endswith(f"{DESK}{conversation_id}/")
    script = site.static_root / "poppy_django" / "desk" / "desk.js"
    for route in held:  # served now, as the deployment's web server would
        route.fulfill(body=script.read_bytes(), content_type="text/javascript")
    page.unroute("**/static/poppy_django/desk/desk.js")
    page.wait_for_selector("#poppy-desk[data-ready='1']", timeout=20_000)
    bob.live()

    # Ready: "r" goes to the reply box, and every word typed after it is in it.
    page.keyboard.press("r")
    page.keyboard.type(words)
    assert page.input_value("[data-reply]") == words
    page.keyboard.press("Control+Enter")  # no one has it: sending joins
    reads(agent, conversation_id, words)
    page.wait_for_function("document.querySelector('[data-reply]').value === ''")
    page.keyboard.press("Escape")  # out of the reply box

    # Another customer waits. Bob leaves for the queue (its page not served yet) and types
    # on: no key is a shortcut ("n" would have opened the other customer's conversation).
    ned = PersonalAgent(user_id=unique("ned")).at(site.base)
    other = started(site, ned, "Hello?")
    asks_for_a_person(ned, other)
    bob.told_of(other)
    queue = re.compile(re.escape(site.base + DESK) + r"$")
    leaving: list[Any] = []
    page.route(queue, lambda route: leaving.append(route))
    page.keyboard.press("q")
    # (A Playwright call lets the route's handler run; the page's own calls wait for the next.)
    eventually(lambda: bob.context.cookies() is not None and leaving, timeout=20)
    page.keyboard.type("right, now the next one")
    for route in leaving:
        route.continue_()
    page.unroute(queue)
    page.wait_for_url(f"**{DESK}")
    bob.live()
    assert page.url == f"{site.base}{DESK}"


def test_at_390_px_nothing_runs_off_and_no_badge_breaks_inside_a_word(
    browser: Any, site: Site
) -> None:
    phone = Staff(browser, site, "alice", width=390, height=844)
    try:
        phone.sign_in()
        agent = PersonalAgent(user_id=unique("lou")).at(site.base)
        earlier = started(site, agent, "Hello, is anyone there?", user_name="Lou")
        conversation_id = started(site, agent, "Where is my order A-1?", user_name="Lou")
        asks_for_a_person(agent, conversation_id)
        phone.page.wait_for_selector(f'tr[data-conversation-id="{conversation_id}"]')
        states = phone.page.locator(".poppy-queue .poppy-badge").all_text_contents()
        assert "waiting for a person" in states and "agent idle" in states, states
        for page_name in ("queue", "conversation"):
            if page_name == "conversation":
                phone.open(conversation_id)
                phone.page.wait_for_selector(f'[data-earlier] [data-conversation-id="{earlier}"]')
            screenshot(phone.page, f"desk-{page_name}-390", full_page=True)
            assert phone.fits(), (page_name, phone.page.evaluate(OFF_THE_PAGE))
            words = phone.page.evaluate(BADGE_WORDS)
            assert words, "no badge measured"
            broken = [word for word in words if word["lines"] != 1]
            assert broken == [], broken
        assert phone.errors == []
    finally:
        phone.close()


def test_the_conversation_at_1024(browser: Any, site: Site) -> None:
    """The side panel under the transcript, for the docs."""
    person = Staff(browser, site, "bob", width=1024, height=900)
    try:
        person.sign_in()
        agent = PersonalAgent(user_id=unique("max")).at(site.base)
        started(site, agent, "Do you repair zips?", user_name="Max Berg")
        conversation_id = started(site, agent, "My jacket's zip broke", user_name="Max Berg")
        asks_for_a_person(agent, conversation_id)
        person.open(conversation_id)
        assert person.fits()
        assert titled(person.page, "Max Berg")
        screenshot(person.page, "desk-customer-1024", full_page=True)
        assert person.errors == []
    finally:
        person.close()
