"""A worker killed mid-turn: the turn is taken up again once its lease expires, its reply is
written exactly once under the same message id, and an executed action is not run again.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.agents import PersonalAgent, company_messages
from tests.multiprocess.cluster import Cluster
from tests.waiting import eventually

pytestmark = pytest.mark.multiprocess


def _query(mp: Cluster, sql: str, *params: object) -> list[tuple]:
    with psycopg.connect(mp.env["DATABASE_URL"].replace("postgres://", "postgresql://")) as conn:
        return conn.execute(sql, params).fetchall()


def _reap_until_answered(
    mp: Cluster, pa: PersonalAgent, web: str, conversation_id: str, count: int
):
    """Run the reaper until the turn has been taken up again and answered."""

    def reaped() -> list[dict[str, Any]] | None:
        mp.manage("poppy_reap")
        events = pa.at(web).all_events(conversation_id)
        last = events[-1]
        answered = len(company_messages(events)) >= count
        return events if answered and last["type"] == "state" and last["status"] == "idle" else None

    return eventually(reaped, timeout=60, what="the turn taken up again and answered")


def test_killed_mid_reply_is_answered_once_with_the_same_message_id(mp: Cluster):
    web = mp.web("web")
    mp.worker("worker-1")
    pa = PersonalAgent()
    started = pa.at(web).post("", pa.message("#slow please"))
    assert started.status_code == 201
    conversation_id = started.json()["conversation_id"]

    stream = pa.at(web).stream(conversation_id)
    first_delta = next(data for name, _, data in stream if name == "text-delta")
    stream.close()
    mp.kill("worker-1")  # mid-reply: one piece written, the rest never
    mp.sessions_ended("worker-1")  # what it had sent is committed or rolled back by now
    assert company_messages(pa.at(web).all_events(conversation_id)) == []

    mp.worker("worker-2")
    events = _reap_until_answered(mp, pa, web, conversation_id, 1)
    replies = company_messages(events)
    assert [reply["text"] for reply in replies] == ["Let me check that for you."]
    assert replies[0]["id"] == first_delta["message_id"]
    assert [e["status"] for e in events if e["type"] == "state"] == ["working", "idle"]


def test_action_executed_before_the_crash_is_not_executed_again(mp: Cluster):
    web = mp.web("web")
    mp.worker("dying", app="tests.multiprocess.dying_worker")
    pa = PersonalAgent(account_id="acct-1", scopes=("poppy:read", "poppy:write"))
    conversation_id = pa.at(web).post("", pa.message("cancel A-2")).json()["conversation_id"]

    mp.exited("dying")
    assert _query(mp, "SELECT status FROM shop_order WHERE id = 'A-2'") == [("cancelled",)]
    assert company_messages(pa.at(web).all_events(conversation_id)) == []

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
