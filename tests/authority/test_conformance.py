"""The protocol's public conformance suite against the example project as shipped.

``personal_agent_protocol.conformance`` plays a personal agent (every case of its five
suites: lifecycle, conversations, protocol, security, operations) against Acme running as
:mod:`tests.authority.shipped` starts it: its own settings and URLs, ``DJANGO_DEBUG=0``,
uvicorn over TLS, a Celery worker, PostgreSQL and Redis; the agents' client metadata fetched
over HTTPS through Acme's outbound hooks; a customer's consent given on Acme's own pages
(:mod:`tests.authority.driver`), a browser of the suite's own for the browser-session cases;
the company's operator (revising a proposal, pruning events, counting an operation's runs)
is a shell in the deployment's environment (:class:`tests.authority.shipped.Operator`).

Every case passes except those docs/conformance.md lists (its table "Cases that do not
pass", read here), each with its reason: the test fails on any other failure or skip, and
on a listed case that passes (the list only shrinks; a case listed as racing the turn may
go either way: ``timing`` fails or passes, ``timing-skip`` skips or passes). It also fails
on any 5xx answer or traceback in the services' logs. The report is kept under
``var/conformance/``.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from personal_agent_protocol.conformance import (
    ConformanceContext,
    Proposal,
    Scenario,
    run_conformance,
    select_cases,
)
from personal_agent_protocol.demo.kit import AgentIdentity
from personal_agent_protocol.operations import TermLimit

from tests.authority.driver import AcmeUser
from tests.authority.sdk_agent import RealClock
from tests.authority.shipped import ORIGIN, PASSWORD, Operator, shipped_acme

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "conformance.md"
REPORT_DIR = ROOT / "var" / "conformance"

#: Acme as shipped: its orders API needs orders:read; asking for one's orders signed out
#: makes the Company Agent ask for sign-in. Cancelling an order proposes an Operation
#: (through the API, and in a conversation for "cancel A-2"); A-1 has shipped, so cancelling
#: it, confirmed, fails and its result says so; emailing A-2's receipt may be confirmed under
#: a standing permission. Its MCP server reads the orders.
SCENARIO = Scenario(
    read_path="/api/orders",
    read_scope="orders:read",
    scopes=("poppy:read", "poppy:write", "orders:read"),
    proposals={
        "user": Proposal(
            "POST", "/api/orders/A-2/cancel", documented_as="/api/orders/{order_id}/cancel"
        ),
        "fails": Proposal("POST", "/api/orders/A-1/cancel"),
        # Emailing a receipt opts in to standing permissions (user_approval_required false).
        "standing": Proposal("POST", "/api/orders/A-2/receipt"),
        # A refund's outcome stays unknown (in_progress) until the provider answers.
        "unknown": Proposal("POST", "/api/orders/A-2/refund"),
    },
    standing_action="send_receipt",
    standing_limits=(TermLimit("order_id", allowed=frozenset({"A-2"})),),
    standing_too_low=(TermLimit("order_id", allowed=frozenset({"A-1"})),),
    operation_prompt="cancel A-2",
    account_prompt="What are my orders?",
    greeting="Hello.",
    mcp_read_tool="list_orders",
    # What the operation's page (/operations/<id>) posts: its confirm button and revision.
    web_confirm_form={"action": "confirm", "revision": "{revision}"},
)
#: What Acme's staff change when they revise a proposal (``operations.terms-changed``).
REVISED_SUMMARY = "Cancel order A-2 (refund within 5 days)"

_ROW = re.compile(
    r"^\| `(?P<case>[a-z]+\.[a-z0-9-]+)` \| "
    r"(?P<outcome>failed|skipped|timing|timing-skip) \| (?P<why>.+) \|$"
)


def listed_cases() -> dict[str, tuple[str, str]]:
    """docs/conformance.md's cases that do not pass: case -> (outcome, reason)."""
    text = DOCS.read_text()
    section = text.split("### Cases that do not pass", 1)[1].split("\n## ", 1)[0]
    listed = {}
    for line in section.splitlines():
        found = _ROW.match(line.strip())
        if found:
            listed[found["case"]] = (found["outcome"], found["why"])
    return listed


def test_every_suite_as_shipped(tmp_path: Path) -> None:
    atlas = AgentIdentity(domain="atlas.example", name="Atlas")
    # A second personal agent, listing no extension.
    plain = AgentIdentity(domain="plain.example", name="Plain", extensions=())
    with shipped_acme(tmp_path, [atlas, plain]) as acme:
        operator = Operator(acme)

        def forget(conversation_id: str) -> None:
            operator.forget(conversation_id)

        def revise(operation_id: str) -> None:
            operator.revise(operation_id, REVISED_SUMMARY)

        # A device sign-in's interval passes on the agents' clock for their poll, which the
        # authority answers at once (the consent was given first); its pacing of a second
        # poll stays as shipped.
        clock = RealClock()
        driver = AcmeUser(
            acme.client,
            ORIGIN,
            plain,
            password=PASSWORD,
            forget=forget,
            revise=revise,
            performed=operator.performed,
            pass_time=clock.lend,
        )

        async def run() -> Any:
            async with acme.client() as http, acme.client() as browser:
                context = ConformanceContext(
                    ORIGIN,
                    identity=atlas,
                    http=http,
                    clock=clock,
                    driver=driver,
                    scenario=SCENARIO,
                    address_resolver=acme.resolve,
                    browser_http=browser,
                )
                return await run_conformance(context, cases=select_cases())

        try:
            report = asyncio.run(run())
        finally:
            operator.close()
        problems = acme.log_problems()

    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    (REPORT_DIR / "report.json").write_text(json.dumps(report.to_json(), indent=2))
    (REPORT_DIR / "report.xml").write_text(report.to_junit())

    outcomes = {result.id: (result.outcome, result.message) for result in report.results}
    assert len(outcomes) == len(select_cases())
    listed = listed_cases()
    # Cases racing the turn (the suite reads without waiting): "timing" fails when the reply
    # lands after the suite's read, as it usually does, and may pass when it lands before;
    # "timing-skip" looks for the reply's pieces and skips when the reply was written before
    # its stream opened (pieces are never stored). Any other outcome is unexpected.
    allowed = {
        "failed": {"failed"},
        "skipped": {"skipped"},
        "timing": {"failed", "passed"},
        "timing-skip": {"skipped", "passed"},
    }
    unexpected = {
        case: found
        for case, found in outcomes.items()
        if found[0] != "passed" and found[0] not in allowed.get(listed.get(case, ("",))[0], ())
    }
    now_passing = sorted(
        case
        for case, (outcome, _) in listed.items()
        if outcome in ("failed", "skipped") and outcomes.get(case, ("",))[0] == "passed"
    )
    assert not unexpected, f"not passing and not listed in docs/conformance.md: {unexpected}"
    assert not now_passing, f"listed in docs/conformance.md but passing (unlist): {now_passing}"
    assert set(listed) <= set(outcomes), f"listed but not run: {set(listed) - set(outcomes)}"
    assert not problems, "\n".join(problems[:40])
