"""A worker killed mid-turn: the turn is taken up again once its lease expires, its reply is
written exactly once under the same message id, and an executed action is not run again.
"""

from __future__ import annotations

import time

import psycopg
import pytest

from tests.multiprocess.cluster import Cluster
from tests.multiprocess.http import HttpAgent, company_messages

pytestmark = pytest.mark.multiprocess


def _query(mp: Cluster, sql: str, *params: object) -> list[tuple]:
    with psycopg.connect(mp.env["DATABASE_URL"].replace("postgres://", "postgresql://")) as conn:
        return conn.execute(sql, params).fetchall()


def _reap_until_answered(mp: Cluster, pa: HttpAgent, web: str, conversation_id: str, count: int):
    """Run the reaper until the turn has been taken up again and answered."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        mp.manage("poppy_reap")
        events = pa.all_events(web, conversation_id)
        last = events[-1]
        if (
            len(company_messages(events)) >= count
            and last["type"] == "state"
            and last["status"] == "idle"
        ):
            return events
        time.sleep(1)
    raise AssertionError(f"never answered: {pa.all_events(web, conversation_id)}")


def test_killed_mid_reply_is_answered_once_with_the_same_message_id(mp: Cluster):
    web = mp.web("web")
    mp.worker("worker-1")
    pa = HttpAgent()
    started = pa.post(web, "", pa.message("#slow please"))
    assert started.status_code == 201
    conversation_id = started.json()["conversation_id"]

    stream = pa.stream(web, conversation_id)
    first_delta = next(data for name, _, data in stream if name == "text-delta")
    stream.close()
    mp.kill("worker-1")  # mid-reply: one piece written, the rest never
    time.sleep(0.5)
    assert company_messages(pa.all_events(web, conversation_id)) == []

    mp.worker("worker-2")
    events = _reap_until_answered(mp, pa, web, conversation_id, 1)
    replies = company_messages(events)
    assert [reply["text"] for reply in replies] == ["Let me check that for you."]
    assert replies[0]["id"] == first_delta["message_id"]
    assert [e["status"] for e in events if e["type"] == "state"] == ["working", "idle"]


def test_action_executed_before_the_crash_is_not_executed_again(mp: Cluster):
    web = mp.web("web")
    mp.worker("dying", app="tests.multiprocess.dying_worker")
    pa = HttpAgent(account_id="acct-1", scopes=("poppy:read", "poppy:write"))
    conversation_id = pa.post(web, "", pa.message("cancel A-2")).json()["conversation_id"]

    deadline = time.monotonic() + 30
    while mp.processes["dying"].poll() is None:
        assert time.monotonic() < deadline, mp.log("dying")
        time.sleep(0.1)
    mp.processes.pop("dying")
    assert _query(mp, "SELECT status FROM shop_order WHERE id = 'A-2'") == [("cancelled",)]
    assert company_messages(pa.all_events(web, conversation_id)) == []

    mp.worker("worker-2")
    events = _reap_until_answered(mp, pa, web, conversation_id, 1)
    replies = company_messages(events)
    assert len(replies) == 1
    # Had it run again it would have failed: A-2 is no longer processing.
    assert replies[0]["data"]["actions"] == [
        {
            "tool": "cancel_order",
            "status": "succeeded",
            "summary": "Cancel order A-2",
            "result": {"order_id": "A-2", "status": "cancelled"},
        }
    ]
    assert replies[0]["text"] == "Done: Cancel order A-2."
    assert _query(mp, "SELECT count(*) FROM poppy_django_actionrecord") == [(1,)]
