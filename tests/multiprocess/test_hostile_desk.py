"""Hostile input at the desk (issue 51: R2 and R9), against the example project in
production mode (uvicorn, a Celery worker, PostgreSQL, Redis, its metrics scraped as
docs/operations.md sets them up; staff signed in to the admin as people are).

R2: one personal agent cannot fill the desk's queue: waiting handoffs are bounded per User
and per client, the route is throttled, every refusal is the wire's ``429
too_many_requests`` and counted (a concurrent burst over two web processes included), and a
real customer's handoff is queued ahead of a flooding client's. R9: the desk's parameters
and ids are validated: ``?before=²``, a 5,000-digit ``before`` and a conversation id holding
U+0000 are a 400 or a 404, never a 500, while the pages they would have shown still answer.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.agents import PersonalAgent, company_messages, unique
from tests.multiprocess.cluster import Cluster, cluster
from tests.multiprocess.test_handoff_unattended import DESK, PASSWORD, open_the_desk
from tests.multiprocess.test_observability import scrape, value
from tests.waiting import eventually

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]
STAFF = "sam"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    """One deployment (its web process logs every request), with a staff member of the desk."""
    tmp = Path(tmp_path_factory.mktemp("hostile-desk"))
    with cluster(tmp) as running:
        running.env.update(
            OTEL_METRICS_EXPORTER="prometheus_multiprocess",
            OTEL_METRIC_EXPORT_INTERVAL="500",
            PROMETHEUS_MULTIPROC_DIR=str(tmp / "metrics"),
        )
        running.manage(
            "shell",
            "-c",
            "from django.contrib.auth.models import Permission, User\n"
            f"u = User.objects.create_user({STAFF!r}, password={PASSWORD!r}, is_staff=True)\n"
            "u.user_permissions.add(Permission.objects.get(codename='handle_conversations'))",
        )
        running.worker("worker")
        web = running.web("web", access_log=True)
        yield running, web
        log = running.log("web")
    assert '" 500' not in log and "Traceback" not in log, log


def answered_conversation(base: str) -> str:
    agent = PersonalAgent(user_id=unique("hostile-desk")).at(base)
    started = agent.post("", agent.message("hello"))
    assert started.status_code == 201, started.text
    conversation_id = str(started.json()["conversation_id"])
    agent.events_until(conversation_id, lambda events: len(company_messages(events)) == 1)
    return conversation_id


def test_the_desks_parameters_and_ids_are_a_400_or_a_404(site: tuple[Cluster, str]) -> None:
    _, web = site
    conversation_id = answered_conversation(web)
    page = f"{DESK}{conversation_id}/"
    with open_the_desk(web, STAFF) as desk:
        assert desk.get(page, params={"before": "3"}).status_code == 200
        for before in ("²", "٣", "9" * 5000):
            assert desk.get(page, params={"before": before}).status_code == 400, before
        for tail in ("", "events.json", "canned.json", "stream/"):
            assert desk.get(f"{DESK}cnv_a%00b/{tail}").status_code == 404, tail
        headers = {"X-CSRFToken": desk.cookies["csrftoken"], "Referer": f"{web}{page}"}
        reply = desk.post(f"{DESK}cnv_a%00b/action/reply/", json={}, headers=headers)
        assert reply.status_code == 404
        assert desk.get(f"{page}events.json", params={"after": "9" * 5000}).status_code == 400


#: Shipped: POPPY's MAX_WAITING_HANDOFFS_PER_USER, ..._PER_CLIENT and the "handoff" rate.
PER_USER, PER_CLIENT, PER_MINUTE = 2, 20, 10
FLOODER = "https://flood.example/agent"


def quiet_conversation(agent: PersonalAgent) -> str:
    """A conversation started by a context-only message (no turn to wait for)."""
    started = agent.post("", {"message": {"id": unique("ctx"), "sender": "agent", "context": {}}})
    assert started.status_code == 201, started.text
    return str(started.json()["conversation_id"])


def hand_off(agent: PersonalAgent, conversation_id: str) -> httpx.Response:
    return agent.post(f"/{conversation_id}/handoff", {})


def test_a_flood_of_handoffs_is_bounded_and_a_real_customer_waits_ahead_of_it(
    site: tuple[Cluster, str],
) -> None:
    _, web = site
    with open_the_desk(web, STAFF) as desk:  # someone is there: handoffs are queued
        # One User asks for a person in five conversations at once.
        flooder = PersonalAgent(client_id=FLOODER, user_id=unique("flood")).at(web)
        first_user = [hand_off(flooder, quiet_conversation(flooder)) for _ in range(5)]
        # Then fresh Users of the same client, until the client's bound.
        queued = [c.json()["conversation_id"] for c in first_user if c.status_code == 202]
        fresh = []
        for _ in range(PER_CLIENT):
            agent = PersonalAgent(client_id=FLOODER, user_id=unique("flood")).at(web)
            fresh.append(hand_off(agent, quiet_conversation(agent)))
        queued += [a.json()["conversation_id"] for a in fresh if a.status_code == 202]
        # A real customer, through another personal agent.
        customer = PersonalAgent(client_id="https://real.example/agent").at(web)
        real = quiet_conversation(customer)
        asked = hand_off(customer, real)
        # Asking again and again in one conversation: the route's rate.
        repeater = PersonalAgent(client_id="https://repeat.example/agent").at(web)
        again = quiet_conversation(repeater)
        repeated = [hand_off(repeater, again) for _ in range(PER_MINUTE + 1)]
        alerts = desk.get(f"{DESK}alerts.json").json()
        rows = desk.get(DESK, params={"status": "waiting", "partial": "rows"}).text

    assert [a.status_code for a in first_user] == [202] * PER_USER + [429] * (5 - PER_USER)
    assert [a.status_code for a in fresh] == [202] * (PER_CLIENT - PER_USER) + [429] * PER_USER
    for refused in [*first_user[PER_USER:], *fresh[-PER_USER:], repeated[-1]]:
        assert refused.json()["error"] == "too_many_requests", refused.text
        assert int(refused.headers["Retry-After"]) > 0
    assert [a.status_code for a in repeated] == [202] * PER_MINUTE + [429]
    assert asked.status_code == 202 and asked.json()["status"] == "queued", asked.text
    # Fair order: the real customer right after the flood's first, ahead of its 19 others.
    order = [item["id"] for item in alerts["conversations"]]
    assert order[:2] == [queued[0], real], order
    in_queue = [found for found in re.findall(r"cnv_[0-9a-f]+", rows) if found in {*queued, real}]
    assert list(dict.fromkeys(in_queue))[:2] == [queued[0], real]
    counted = {"user_waiting": 5 - PER_USER, "client_waiting": PER_USER, "rate": 1}

    def refusals() -> dict[str, float]:
        samples = scrape(web)
        return {
            reason: value(samples, "poppy_handoffs_refused_total", reason=reason)
            for reason in counted
        }

    eventually(lambda: refusals() == counted, what=lambda: f"the refusals counted: {refusals()}")


def test_a_burst_of_handoffs_over_two_web_processes_stays_within_the_clients_bound(
    site: tuple[Cluster, str],
) -> None:
    """Fresh Users of one personal agent ask for a person all at once, their requests spread
    over two web processes of the deployment: the count and the queueing of each are one
    after the other under the client's lock (in PostgreSQL, not in a process), so exactly the
    client's bound is queued. A real customer who asks next is queued, ahead of the burst's
    others."""
    running, web = site
    other_web = running.web("web-2", access_log=True)
    burst = PER_CLIENT + 10
    agents = [
        PersonalAgent(client_id="https://burst.example/agent", user_id=unique("burst")).at(base)
        for base in [web, other_web] * (burst // 2)
    ]
    conversations = [quiet_conversation(agent) for agent in agents]
    at_once = threading.Barrier(burst)

    def ask(pair: tuple[PersonalAgent, str]) -> httpx.Response:
        at_once.wait(timeout=60)
        return hand_off(*pair)

    before = value(scrape(web), "poppy_handoffs_refused_total", reason="client_waiting")
    with open_the_desk(web, STAFF) as desk:
        with ThreadPoolExecutor(max_workers=burst) as pool:
            answers = list(pool.map(ask, zip(agents, conversations, strict=True)))
        customer = PersonalAgent(client_id="https://real-2.example/agent").at(other_web)
        real = quiet_conversation(customer)
        asked = hand_off(customer, real)
        rows = desk.get(DESK, params={"status": "waiting", "partial": "rows"}).text

    queued = [c for c, a in zip(conversations, answers, strict=True) if a.status_code == 202]
    refused = [a for a in answers if a.status_code != 202]
    assert len(queued) == PER_CLIENT, sorted(a.status_code for a in answers)
    for answer in refused:
        assert answer.status_code == 429, answer.text
        assert answer.json()["error"] == "too_many_requests"
    assert asked.status_code == 202 and asked.json()["status"] == "queued", asked.text
    # Fair order: the customer waits behind at most the burst's first, never its others.
    in_queue = [found for found in re.findall(r"cnv_[0-9a-f]+", rows) if found in {*queued, real}]
    in_queue = list(dict.fromkeys(in_queue))
    assert set(in_queue) == {*queued, real}, in_queue
    assert in_queue.index(real) == 1, in_queue
    eventually(
        lambda: (
            value(scrape(web), "poppy_handoffs_refused_total", reason="client_waiting")
            == before + len(refused)
        ),
        what="the burst's refusals counted",
    )
    log = running.log("web-2")
    assert '" 500' not in log and "Traceback" not in log, log
