"""A team lead's desk in Chromium: two staff and a supervisor, each in a browser context of
their own, against the example project in production mode (uvicorn, Celery, PostgreSQL,
Redis; tests/desk/browser.py): a macro, a bulk action from the admin's list, a CSAT answer
sent by a real personal agent (``poppy_django.client`` with a DPoP-bound Session Token),
and the reports page's figures checked against the events the tests produced.

One cluster and one browser for the module; the tests run in order and the last one reads
what the others did.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from poppy_django.client import DPoPKey, PoppyClient
from tests.agents import company_messages, unique
from tests.desk.browser import (
    DESK,
    PASSWORD,
    Site,
    Staff,
    handed_off,
    production_site,
    screenshot,
)
from tests.multiprocess.cluster import free_port
from tests.waiting import eventually

pytestmark = [pytest.mark.browser, pytest.mark.multiprocess, pytest.mark.timeout(420)]

STAFF = ("alice", "bob")
LEAD = "lena"
CHANGELIST = "/admin/poppy_django/conversation/"
REPORTS = f"{DESK}reports/"
MACRO = """
from poppy_django.models import Macro, Tag
macro = Macro.objects.create(shortcut="refund-sent", title="Refund sent", then="close",
                             reply="Hi {name|there}, your refund is on its way.")
macro.tags.add(Tag.objects.get_or_create(name="refund")[0])
"""
#: What the tests produced, for the reports: conversation id -> (outcome, staff).
produced: dict[str, tuple[str, str]] = {}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with production_site(Path(tmp_path_factory.mktemp("lead"))) as running:
        for name in STAFF:
            running.add_staff(name)
        running.add_staff(LEAD, superuser=True)  # the supervisor: the reports' permission
        running.shell(MACRO)
        yield running


@pytest.fixture(scope="module")
def personal_agents_base(site: Site) -> str:
    """A web process of the same deployment that verifies DPoP-bound Session Tokens (the
    development authority signs them), for a personal agent with real credentials."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        "POPPY_AUTHENTICATE": "poppy_django.verifier.dpop.verify",
        "POPPY_DEV_AUTHORITY": "1",
        "POPPY_ISSUER": base,
    }
    return site.cluster.web("web-dpop", port=port, env=env)


@pytest.fixture
def alice(browser: Any, site: Site) -> Iterator[Staff]:
    person = Staff(browser, site, "alice")
    try:
        yield person.sign_in()
        assert person.errors == [], person.errors
    finally:
        person.close()


def supervisor(browser: Any, site: Site, *, width: int = 1440, next_url: str = REPORTS) -> Staff:
    """Lena, signed in through the admin's login straight to ``next_url``: she never opens
    the desk's queue, so she is never on shift (never given a handoff)."""
    lena = Staff(browser, site, LEAD, width=width, height=1000)
    page = lena.page
    page.goto(f"{site.base}/admin/login/?next={next_url}")
    page.fill("#id_username", LEAD)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"**{next_url}")
    return lena


def assignee_of(site: Site, conversation_id: str) -> str:
    code = f"from poppy_django import service; print(service.get('{conversation_id}').assignee)"
    return site.shell(code).strip()


def test_a_macro_replies_tags_and_closes_in_one_click(site: Site, alice: Staff) -> None:
    conversation_id, agent = handed_off(site, "Where is my refund for the tent?")
    alice.open(conversation_id)
    alice.page.select_option("[data-macros]", "refund-sent")
    alice.page.click("form[data-form=macro] button[type=submit]")
    alice.page.wait_for_selector('[data-field="status_label"]:text("closed")', timeout=20_000)
    alice.page.wait_for_selector('[data-tags] [data-tag="refund"]')
    alice.page.wait_for_function(
        "document.querySelector('[data-transcript]').textContent"
        ".includes('alice ran the macro refund-sent')",
        timeout=20_000,
    )
    events = agent.events_until(
        conversation_id,
        lambda evs: any(e["type"] == "state" and e["status"] == "closed" for e in evs),
    )
    reply = company_messages(events)[-1]
    assert (reply["text"], reply["sender"]) == ("Hi there, your refund is on its way.", "human")
    assert "refund" not in str([e for e in events if e["type"] != "message"])
    produced[conversation_id] = ("joined", "alice")


def test_a_bulk_tag_from_the_admin_list_reaches_the_queue_live(
    browser: Any, site: Site, alice: Staff
) -> None:
    waiting = [handed_off(site, f"Question {n} about my stove")[0] for n in (1, 2)]
    for conversation_id in waiting:
        alice.page.wait_for_selector(f'tr[data-conversation-id="{conversation_id}"]')
    lena = supervisor(browser, site, next_url=f"{CHANGELIST}?desk=waiting")
    try:
        page = lena.page
        for conversation_id in waiting:
            page.check(f'input[name=_selected_action][value="{conversation_id}"]')
        page.select_option("select[name=action]", "tag_selected")
        page.click("button[name=index]")
        page.fill("#id_tags", "Stove, priority")
        page.click("form[data-bulk] input[type=submit]")
        page.wait_for_selector(".messagelist")
        assert "2 conversations changed." in page.text_content(".messagelist")
        # Alice's queue hears of each change on the live channel: no reload.
        for conversation_id in waiting:
            alice.page.wait_for_selector(
                f'tr[data-conversation-id="{conversation_id}"] [data-tag="priority"]',
                timeout=20_000,
            )
        assert lena.errors == []
    finally:
        lena.close()
    alice.page.goto(f"{site.base}{DESK}?tag=priority&q=stove")
    alice.live()
    assert "<mark>" in alice.page.inner_html(f'tr[data-conversation-id="{waiting[0]}"]')
    screenshot(alice.page, "desk-queue-tags-1440")
    for conversation_id in waiting:
        produced[conversation_id] = ("waiting", "")


def test_a_real_personal_agent_rates_the_help_and_the_reports_count_it(
    browser: Any, site: Site, personal_agents_base: str
) -> None:
    bob = Staff(browser, site, "bob").sign_in()
    try:
        key = DPoPKey()
        token = site.cluster.manage(
            "poppy_token",
            "--user",
            unique("csat-user"),
            f"--jkt={key.thumbprint}",
            f"--url={personal_agents_base}",
            # Signed by the development authority as the issuer that web process trusts.
            env={"POPPY_DEV_AUTHORITY": "1", "POPPY_ISSUER": personal_agents_base},
        ).splitlines()[-1]
        with PoppyClient(f"{personal_agents_base}/poppy/conversations", token, key=key) as client:
            started = client.start("My stove will not light", wait=10)
            conversation_id = started["conversation_id"]
            # The agent's answer first (the POST's wait ends at its first new event, the
            # conversation working): answered after Bob left, it came after the survey, the
            # last company message then, which a fresh web process's first dispatch (made
            # after the 202) was slow enough to allow.
            _last_company_message(client, conversation_id, None)
            assert client.handoff(conversation_id)["status"] == "queued"
            bob.open(conversation_id)
            bob.page.fill("[data-reply]", "Hold the knob down for ten seconds, then light it.")
            bob.page.click("form[data-form=reply] button[type=submit]")
            bob.settled(1)
            bob.page.click("button[data-action=leave]")
            bob.settled(2)
            survey = _last_company_message(client, conversation_id, "csat_survey")
            [component] = survey["data"]["components"]
            # A personal agent that knows the component answers with data.
            survey_id = component["props"]["survey_id"]
            client.send(
                conversation_id,
                data={"csat": {"survey_id": survey_id, "rating": 4, "comment": "It lit!"}},
            )
            thanks = _last_company_message(client, conversation_id, None)
            assert thanks["text"] == "Thank you for your rating."
            events = _all_events(client, conversation_id)
        produced[conversation_id] = ("joined", "bob")
        # One of the waiting ones, given to Alice while she was on the desk: she left it with
        # the test before, so at a workers' sweep it goes to Bob, the one there (read until
        # it has: read at once, it could still name Alice and move while she signed back in).
        # Bob says no one can take it: unavailable, his.
        unavailable = next(cid for cid, (outcome, _) in produced.items() if outcome == "waiting")
        eventually(
            lambda: assignee_of(site, unavailable) == "bob",
            timeout=60,
            what="the waiting handoff Alice left given to Bob at a sweep",
        )
        bob.open(unavailable)
        bob.page.fill("#poppy-unavailable", "our stove expert is out today")
        bob.page.click("form[data-form=unavailable] button[type=submit]")
        bob.settled(1)
        produced[unavailable] = ("unavailable", "bob")
        assert bob.errors == []
    finally:
        bob.close()
    _the_reports_show_it(browser, site, events)


def _all_events(client: PoppyClient, conversation_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = client.events(conversation_id, cursor=cursor)
        found.extend(page["events"])
        cursor = page["cursor"]
        if not page["has_more"]:
            return found


def _last_company_message(
    client: PoppyClient, conversation_id: str, component: str | None
) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        said = company_messages(_all_events(client, conversation_id))
        if not said:
            return None
        last = said[-1]
        names = [c.get("name") for c in (last.get("data") or {}).get("components", [])]
        return last if (component in names if component else not names) else None

    return eventually(found, what=f"a company message ({component or 'plain'})", timeout=30)


def _the_reports_show_it(browser: Any, site: Site, csat_events: list[dict[str, Any]]) -> None:
    """Lena's reports page: every figure as the tests produced it."""
    outcomes = [outcome for outcome, _ in produced.values()]
    lena = supervisor(browser, site)
    try:
        page = lena.page
        page.wait_for_selector("#poppy-reports[data-charts=drawn]", timeout=20_000)

        def figure(name: str) -> str:
            return page.text_content(f'[data-figure="{name}"]').strip()

        assert figure("handoffs") == str(len(produced))
        for outcome in ("joined", "missed", "unavailable"):
            assert figure(outcome) == str(outcomes.count(outcome)), outcome
        assert figure("csat").startswith("4.0 / 5 · 100 % satisfied")
        for name in STAFF:
            row = f'[data-report=staff] tr[data-row="{name}"]'
            joined = sum(1 for o, who in produced.values() if who == name and o == "joined")
            assert page.text_content(f'{row} [data-cell="joined"]') == str(joined)
        assert (
            page.text_content('[data-report=staff] tr[data-row="bob"] [data-cell="csat"]')
            == "4.0 (1)"
        )
        said = " ".join(page.text_content("[data-answers]").split())
        assert "4 / 5 “It lit!” · bob" in said
        # Bob's first response, from the events the personal agent read: asked for a person
        # (the queued state) to his first message. The CSV has it to a tenth of a second.
        asked = next(e for e in csat_events if e["type"] == "state" and e["status"] == "queued")
        answered = next(
            m for m in csat_events if m["type"] == "message" and m["message"]["sender"] == "human"
        )
        expected = (_at(answered) - _at(asked)).total_seconds()
        csv_url = page.get_attribute("a[data-csv=staff]", "href")
        rows = list(csv.DictReader(io.StringIO(page.request.get(f"{site.base}{csv_url}").text())))
        bobs = next(row for row in rows if row["staff"] == "bob")
        assert abs(float(bobs["first_response_median_s"]) - expected) < 1.0
        desk = next(row for row in rows if row["staff"] == "Whole desk")
        assert desk["csat_answered"] == "1" and desk["joined"] == str(outcomes.count("joined"))
        for width in (1440, 1024, 390):
            lena.page.set_viewport_size({"width": width, "height": 1000})
            page.reload()
            page.wait_for_selector("#poppy-reports[data-charts=drawn]", timeout=20_000)
            assert lena.fits(), f"the reports page runs off the page at {width} px"
            screenshot(page, f"desk-reports-{width}", full_page=width == 390)
        assert lena.errors == []
    finally:
        lena.close()


def _at(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["created_at"].replace("Z", "+00:00"))


def _closed(events: list[dict[str, Any]]) -> bool:
    return any(e["type"] == "state" and e["status"] == "closed" for e in events)
