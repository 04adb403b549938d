"""The queue's live badge after a failed refresh (issue 50): it said "Could not refresh the
queue; retrying…" for good. In a real browser on the example project as shipped, a refresh
answered as the server answers an outage (503 ``temporarily_unavailable``, ``Retry-After``)
puts the badge down; the desk tries again by itself, and the badge says "Live" again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents import PersonalAgent, company_messages
from tests.desk.browser import CHROMIUM_ARGS, DESK, Site, Staff, chromium, production_site

pytestmark = [pytest.mark.browser, pytest.mark.multiprocess, pytest.mark.timeout(240)]
BADGE = "[data-live]"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Site]:
    with production_site(tmp_path) as site:
        site.add_staff("sam")
        yield site


def test_the_badge_recovers_after_a_failed_refresh(server: Site) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    outage: dict[str, Any] = {"on": True, "answered": 0}

    def the_queue_s_rows(url: str) -> bool:
        return DESK in url and "?status=" in url

    def unavailable(route: Any) -> None:
        if not outage["on"]:
            route.continue_()
            return
        outage["answered"] += 1
        route.fulfill(
            status=503,
            headers={"Retry-After": "5", "Content-Type": "application/json"},
            body=json.dumps(
                {
                    "error": "temporarily_unavailable",
                    "error_description": "The database is unreachable. Try again in 5 seconds.",
                }
            ),
        )

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        try:
            sam = Staff(browser, server, "sam").sign_in()
            page = sam.page
            page.route(the_queue_s_rows, unavailable)

            # A handoff nudges the queue, whose refresh meets the outage.
            agent = PersonalAgent().at(server.base)
            conversation_id = agent.post("", agent.message("hello")).json()["conversation_id"]
            agent.events_until(conversation_id, lambda events: len(company_messages(events)) == 1)
            assert agent.post(f"/{conversation_id}/handoff", {}).json()["status"] == "queued"
            page.wait_for_selector(f"{BADGE}[data-state=down]", timeout=30_000)
            assert page.text_content(BADGE) == "Could not refresh the queue; retrying…"

            # The outage ends: the desk's own retry reads the queue, and says it is live.
            outage["on"] = False
            row = f'tr[data-conversation-id="{conversation_id}"]'
            page.wait_for_selector(row, timeout=30_000)
            page.wait_for_selector(f"{BADGE}[data-state=live]", timeout=30_000)
            assert page.text_content(BADGE) == "Live"
            assert outage["answered"] >= 1
            assert not sam.errors
            sam.close()
        finally:
            browser.close()
