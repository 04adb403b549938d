"""An operation confirmed, then its worker killed mid-action: performed once, by another.

Production processes (uvicorn, Celery, PostgreSQL, Redis) of the example project as
shipped. The Company Agent proposes cancelling an order in a conversation, the company
revises the proposal, the personal agent confirms the current revision, and the worker
performing it is SIGKILLed inside the action (before anything commits). The confirm's
answer is already durable (``in_progress``, ``Retry-After``); a new worker's recovery takes
the operation up and performs it once: the order is cancelled once, one outcome message.
"""

from __future__ import annotations

from typing import Any

import httpx
import psycopg
import pytest

from tests.agents import PersonalAgent, company_messages
from tests.multiprocess.cluster import Cluster
from tests.waiting import eventually

pytestmark = pytest.mark.multiprocess

CLIENT_ID = "https://pa.example/mp"


def _query(mp: Cluster, sql: str, *params: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(mp.env["DATABASE_URL"].replace("postgres://", "postgresql://")) as conn:
        return conn.execute(sql, params).fetchall()


def _operations(web: str, pa: PersonalAgent, path: str, body: Any = None) -> httpx.Response:
    url = f"{web}/poppy/operations/{path}"
    if body is None:
        return httpx.get(url, headers=pa.http_headers(), timeout=40)
    return httpx.post(url, json=body, headers=pa.http_headers(), timeout=40)


def test_a_worker_killed_between_confirm_and_completion_performs_it_once(mp: Cluster) -> None:
    # The authority's stored client metadata of this personal agent lists operations v1.
    mp.manage(
        "shell",
        "-c",
        "from poppy_django.authority.models import Client; Client.objects.create("
        f"client_id={CLIENT_ID!r}, metadata={{'client_id': {CLIENT_ID!r}, "
        "'extensions': {'operations': {'version': '1'}}})",
    )
    web = mp.web("web")
    mp.worker("dying", app="tests.multiprocess.dying_mid_action")
    pa = PersonalAgent(CLIENT_ID, account_id="acct-1", scopes=("poppy:read", "poppy:write"))
    conversation_id = pa.at(web).post("", pa.message("cancel A-2")).json()["conversation_id"]

    events = pa.at(web).events_until(
        conversation_id, lambda es: any("operation" in m for m in company_messages(es))
    )
    proposed = next(m["operation"] for m in company_messages(events) if "operation" in m)
    assert proposed["state"] == "proposed" and proposed["revision"] == 1
    operation_id = proposed["operation_id"]

    mp.manage(
        "shell",
        "-c",
        "from poppy_django.operations import service; "
        f"service.revise({operation_id!r}, summary='Cancel order A-2 (refund in 5 days)')",
    )
    stale = _operations(web, pa, f"{operation_id}/confirm", {"revision": 1, "approved_by": "user"})
    assert stale.status_code == 409 and stale.json()["error"] == "terms_changed"
    assert stale.json()["operation"]["revision"] == 2

    confirmed = _operations(
        web, pa, f"{operation_id}/confirm", {"revision": 2, "approved_by": "user"}
    )
    assert confirmed.status_code == 200, confirmed.text
    assert confirmed.json()["state"] == "in_progress"  # durable; its worker is dying
    assert confirmed.json()["confirmation"]["revision"] == 2
    assert "Retry-After" in confirmed.headers

    mp.exited("dying")
    assert _query(mp, "SELECT status FROM shop_order WHERE id = 'A-2'") == [("processing",)]

    again = _operations(web, pa, f"{operation_id}/confirm", {"revision": 2, "approved_by": "user"})
    assert again.status_code == 200 and again.json()["state"] == "in_progress"  # not twice

    mp.worker("worker-2")

    def performed() -> dict[str, Any] | None:
        mp.manage("poppy_reap")
        read: dict[str, Any] = _operations(web, pa, operation_id).json()
        return read if read["state"] != "in_progress" else None

    read = eventually(performed, timeout=60, what="the operation performed by worker-2")
    assert read["state"] == "succeeded", read
    assert read["confirmation"]["revision"] == 2
    assert _query(mp, "SELECT status FROM shop_order WHERE id = 'A-2'") == [("cancelled",)]
    assert _query(
        mp, "SELECT attempts FROM poppy_django_operation WHERE operation_id = %s", operation_id
    ) == [(2,)]
    outcomes = [
        m
        for m in company_messages(pa.at(web).all_events(conversation_id))
        if m.get("data", {}).get("actions")
    ]
    assert len(outcomes) == 1
    assert outcomes[0]["operation"]["state"] == "succeeded"
