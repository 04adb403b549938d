"""The desk in a real browser (Debian's headless Chromium, driven by Playwright) against a
live uvicorn server on its own PostgreSQL database: a handoff handled end to end.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.agents import PersonalAgent, company_messages, unique
from tests.multiprocess.cluster import ROOT, Cluster, cluster

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = ROOT / "var" / "test-artifacts"
PASSWORD = "desk-test-password"
DESK = "/admin/poppy_django/conversation/desk/"
SETTLED = ".poppy-request[data-state=settled]"


def chromium() -> str:
    for candidate in ("chromium", "chromium-browser"):
        found = shutil.which(candidate)
        if found:
            return found
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    pytest.skip("Chromium is not installed (scripts/ensure-browser.sh: apt-get install chromium)")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Cluster, str]]:
    """One uvicorn process in embedded mode (in-process turns and fan-out) and a desk user."""
    with cluster(tmp_path) as running:
        running.env.pop("REDIS_URL")  # embedded: one process, no Celery, no Redis fan-out
        running.manage(
            "shell",
            "-c",
            "from django.contrib.auth.models import Permission, User\n"
            f"u = User.objects.create_user('sam', password='{PASSWORD}', is_staff=True)\n"
            "u.user_permissions.add(Permission.objects.get(codename='handle_conversations'))",
        )
        yield running, running.web("web")


def settled(page, count: int) -> None:
    page.wait_for_function(
        f"document.querySelectorAll('{SETTLED}').length >= {count}", timeout=15_000
    )


def test_a_support_agent_handles_a_handoff_live(server: tuple[Cluster, str]) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    executable = chromium()
    running, base = server
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    agent = PersonalAgent(user_id=unique("mp-user"))

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 960})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        try:
            # Sign in to the admin and open the desk's queue.
            page.goto(f"{base}/admin/login/?next={DESK}")
            page.fill("#id_username", "sam")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            page.wait_for_url(f"**{DESK}")
            page.wait_for_selector("[data-live][data-state=live]")

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
            assert page.text_content(f"{row} .poppy-first-words").startswith("You said: hello")
            # How long they have waited, counted live in the row ("12 s", "3 min").
            page.wait_for_function(
                f"/^\\d+ (s|min)$/.test(document.querySelector('{row} .poppy-waited')"
                ".textContent.trim())"
            )
            page.wait_for_function(  # the tabs' counts follow too
                "document.querySelector('[data-tabs] li:nth-child(2) .poppy-count')"
                ".textContent === '1'"
            )
            page.screenshot(path=str(ARTIFACTS / "desk-queue.png"))

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
            page.click("button[data-action=join]")
            settled(page, 1)
            page.wait_for_function(
                "document.querySelector('[data-field=assignee]').textContent === 'sam'"
            )
            # Joined: the status says so (the wire's "idle" is not what staff read), and
            # Join is disabled while Sam holds the conversation.
            assert page.text_content("[data-field=status_label]") == "with a person"
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
            assert page.text_content("[data-field=responder]") == "agent"
            assert not page.is_disabled("button[data-action=join]")  # left: Join again
            assert page.text_content("[data-diagnostics-count]") == "0"
            assert page.locator(".poppy-request[data-state=failed]").count() == 0

            # The docs' picture (docs/img/desk.png) is refreshed from this one by hand: a
            # test run leaves the checkout as it found it.
            page.screenshot(path=str(ARTIFACTS / "desk.png"), full_page=True)

            # An action awaiting approval (as a tool with needs_approval=True records it):
            # Approve, and "Actions in this conversation" follows it to its outcome
            # without a reload (it kept "awaiting approval" until one).
            running.manage(
                "shell",
                "-c",
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
            page.screenshot(path=str(ARTIFACTS / "desk-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
