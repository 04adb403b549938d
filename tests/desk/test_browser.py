"""The desk in a real browser (Debian's headless Chromium, driven by Playwright) against the
example project in production mode (uvicorn, Celery, PostgreSQL, Redis: tests/desk/browser.py):
a handoff handled end to end by one person. Two at once: test_team_browser.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.agents import PersonalAgent, company_messages, unique
from tests.desk.browser import (
    ARTIFACTS,
    CHROMIUM_ARGS,
    Site,
    Staff,
    chromium,
    production_site,
    screenshot,
)

pytestmark = [pytest.mark.browser, pytest.mark.multiprocess, pytest.mark.timeout(240)]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Site]:
    """The example project in production mode and a desk user, sam."""
    with production_site(tmp_path) as site:
        site.add_staff("sam")
        yield site


def settled(page, count: int) -> None:
    page.wait_for_function(
        f"document.querySelectorAll('.poppy-request[data-state=settled]').length >= {count}",
        timeout=20_000,
    )


def test_a_support_agent_handles_a_handoff_live(server: Site) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    executable = chromium()
    base = server.base
    agent = PersonalAgent(user_id=unique("mp-user"))

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        sam = Staff(browser, server, "sam")
        page, errors = sam.page, sam.errors
        try:
            # Sign in to the admin and open the desk's queue.
            sam.sign_in()

            # A personal agent talks to the Company Agent, then asks for a person.
            started = agent.at(base).post("", agent.message("hello"))
            assert started.status_code == 201, started.text
            conversation_id = started.json()["conversation_id"]
            agent.at(base).events_until(
                conversation_id, lambda events: len(company_messages(events)) == 1
            )
            handoff = agent.at(base).post(f"/{conversation_id}/handoff", {})
            assert handoff.json()["status"] == "queued"

            # It appears on the queue without a reload, waiting for a person.
            row = f'tr[data-conversation-id="{conversation_id}"]'
            page.wait_for_selector(f"{row}.poppy-status-queued", timeout=15_000)
            assert "waiting for a person" in page.text_content(row)
            # Known by whom it is with and its last words, not only by its id.
            assert "user mp-user-" in page.text_content(f"{row} .poppy-who-link")
            # What the customer said, not the Company Agent's echo of it.
            assert page.text_content(f"{row} .poppy-first-words").strip() == "“hello”"
            # How long they have waited, counted live in the row ("12 s", "3 min").
            page.wait_for_function(
                f"/^\\d+ (s|min)$/.test(document.querySelector('{row} .poppy-waited')"
                ".textContent.trim())"
            )
            page.wait_for_function(  # the tabs' counts follow too
                "document.querySelector('[data-tabs] li:nth-child(2) .poppy-count')"
                ".textContent === '1'"
            )

            # The support agent opens it, joins and replies.
            page.click(f"{row} a")
            page.wait_for_selector("#poppy-desk[data-ready='1']")
            page.wait_for_selector("[data-live][data-state=live]")
            # State changes are one compact line each, not a card like a message.
            waiting = page.locator(".poppy-kind-state .poppy-state-line", has_text="Waiting")
            assert waiting.count() == 1
            assert page.locator(".poppy-kind-state .poppy-event-head").count() == 0
            assert page.text_content("[data-field=status_label]") == "waiting for a person"
            waiting_since = page.text_content("[data-field=handoff_requested_at]")
            # Formatted as "Started" is, with how long ago: not a raw ISO timestamp.
            assert re.search(r"\(\d+ (s|min) ago\)$", waiting_since), waiting_since
            assert not re.search(r"\d{4}-\d\d-\d\dT", waiting_since), waiting_since
            assert not page.is_disabled("button[data-action=join]")
            # The round robin gave it to Sam, the one on shift: it waits for Sam.
            assert page.text_content("[data-field=assignee]") == "sam"
            assert "Assigned to you" in page.text_content("[data-owner]")
            page.click("button[data-action=join]")
            settled(page, 1)
            # Joined: the status says so (the wire's "idle" is not what staff read), and
            # Join is disabled while Sam holds the conversation.
            page.wait_for_function(
                "document.querySelector('[data-field=status_label]').textContent"
                " === 'with a person'"
            )
            assert page.is_disabled("button[data-action=join]")
            assert page.text_content("[data-field=handoff_requested_at]") == "—"
            reply = "Hi, I am Sam from Acme. How can I help?"
            page.fill("#poppy-reply-text", reply)
            page.click("form[data-form=reply] button")
            settled(page, 2)
            reply_request_id = page.get_attribute(".poppy-request >> nth=0", "data-request-id")
            assert reply_request_id
            page.wait_for_selector(f'.poppy-event[data-request-id="{reply_request_id}"]')
            # The request ids are the desk's bookkeeping: none is printed in the transcript.
            assert page.locator("[data-transcript] .poppy-rid").count() == 0
            assert reply_request_id[:8] not in page.text_content("[data-transcript]")

            # The personal agent reads the person's message over HTTP, and nothing staff-only.
            events = agent.at(base).events_until(
                conversation_id,
                lambda events: any(m.get("text") == reply for m in company_messages(events)),
            )
            person = next(m for m in company_messages(events) if m.get("text") == reply)
            assert person["sender"] == "human"
            raw = httpx.get(
                f"{base}/poppy/conversations/{conversation_id}/events", headers=agent.http_headers()
            ).text
            assert reply_request_id not in raw and "sam" not in raw and "request_id" not in raw

            # The support agent leaves; the Company Agent answers again, live on the desk.
            page.click("button[data-action=leave]")
            settled(page, 3)
            asked = agent.at(base).post(
                f"/{conversation_id}/messages", agent.message("your hours?")
            )
            assert asked.status_code == 202, asked.text
            agent.at(base).events_until(
                conversation_id,
                lambda events: "Monday" in str(company_messages(events)[-1].get("text")),
            )
            page.wait_for_selector(".poppy-kind-company:has-text('Monday to Friday')")
            # The status line follows the reply's own state event, a moment later.
            page.wait_for_function(
                "document.querySelector('[data-field=status_label]').textContent === 'agent idle'"
            )
            assert not page.is_disabled("button[data-action=join]")  # left: Join again
            # Staff read no developer's text: no diagnostics panel, no request ids.
            assert page.locator("[data-diagnostics]").count() == 0
            assert page.locator(".poppy-rid").count() == 0
            assert page.locator(".poppy-request[data-state=failed]").count() == 0

            # The docs' picture (docs/img/desk.png; POPPY_DOCS_SCREENSHOTS=1 copies it there).
            screenshot(page, "desk", full_page=True)

            # An action awaiting approval (as a tool with needs_approval=True records it):
            # Approve, and "Actions in this conversation" follows it to its outcome
            # without a reload (it kept "awaiting approval" until one).
            server.shell(
                "from poppy_django.models import ActionRecord\n"
                f"ActionRecord.objects.create(conversation_id='{conversation_id}', "
                "call_key='browser-approval', tool='cancel_order', "
                "arguments={'order_id': 'A-2'}, summary='Cancel order A-2', "
                "status='awaiting_approval', actor_id='acct-1', account_id='acct-1', "
                "roles=['personal_agent', 'scope:poppy:read', 'scope:poppy:write'])",
            )
            page.reload()
            page.wait_for_selector("#poppy-desk[data-ready='1']")
            log = "[data-action-log] li[data-status={}]"
            page.wait_for_selector(log.format("awaiting_approval"))
            page.click("button[data-decision=approve]")
            page.wait_for_selector(log.format("succeeded"), timeout=15_000)
            assert "by sam" in page.text_content("[data-action-log]")
            assert page.locator(log.format("awaiting_approval")).count() == 0

            # A link to one event opens the conversation with it highlighted.
            first = agent.at(base).all_events(conversation_id)[0]["id"]
            page.goto(f"{page.url.split('?')[0]}?event={first}")
            page.wait_for_selector(f"#{first}.poppy-highlight")
            assert errors == [], json.dumps(errors)
        except Exception:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "desk-failure.png"), full_page=True)
            for name in ("web", "worker"):  # what the processes said, beside the failure
                print(f"--- the {name} process's log (its end) ---\n{server.cluster.log(name)}")
            raise
        finally:
            sam.close()
            browser.close()
