"""Recovery with no extra process: no beat, no reaper — only web processes and workers.

A worker SIGKILLed mid-turn is taken up by another worker's recovery sweep, and so is a turn
whose message a worker took from the broker and died holding (the example project keeps no
copy in Redis: kombu's acknowledgement emulation is off); a message that kills every worker
that tries it is answered with the failed-turn message after a bounded number of attempts; an
approved action whose worker dies mid-action is run once by the next.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
import redis

from tests.agents import PersonalAgent, company_messages
from tests.multiprocess.cluster import Cluster
from tests.waiting import eventually

pytestmark = pytest.mark.multiprocess

FAILED = "Sorry, something went wrong on our side. Please try again."


@pytest.fixture
def mp(mp: Cluster) -> Cluster:
    """The cluster, with each process sweeping for orphaned turns every second."""
    mp.env["POPPY_SWEEP_SECONDS"] = "1"
    return mp


def _query(mp: Cluster, sql: str, *params: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(mp.env["DATABASE_URL"].replace("postgres://", "postgresql://")) as conn:
        return conn.execute(sql, params).fetchall()


def _settled(events: list[dict[str, Any]]) -> bool:
    return bool(events) and events[-1]["type"] == "state" and events[-1]["status"] == "idle"


def test_a_killed_worker_is_taken_up_by_another_with_no_beat(mp: Cluster):
    web = mp.web("web")
    mp.worker("worker-1")
    pa = PersonalAgent()
    conversation_id = pa.at(web).post("", pa.message("#slow please")).json()["conversation_id"]
    stream = pa.at(web).stream(conversation_id)
    first_delta = next(data for name, _, data in stream if name == "text-delta")
    stream.close()
    mp.worker("worker-2")  # idle, sweeping
    mp.kill("worker-1")  # mid-reply

    events = pa.at(web).events_until(conversation_id, _settled, timeout=60)
    (reply,) = company_messages(events)
    assert reply == {**reply, "id": first_delta["message_id"], "text": "Let me check that for you."}
    assert [e["status"] for e in events if e["type"] == "state"] == ["working", "idle"]


def test_a_message_a_worker_died_holding_is_answered_by_the_sweep(mp: Cluster):
    """With no place free in its engine, a worker holds the next turn's message it took from
    the broker; SIGKILLed then, it leaves no copy behind (no ``unacked`` hash), and the
    conversation, ``working`` in the database, is taken up by the next worker's sweep."""
    web = mp.web("web")
    mp.env["POPPY_TURNS_IN_FLIGHT"] = "1"
    mp.worker("worker-1")
    del mp.env["POPPY_TURNS_IN_FLIGHT"]
    broker = redis.Redis(port=mp.redis_port)
    queue = mp.env["POPPY_CELERY_QUEUE"]
    pa = PersonalAgent()
    busy = pa.at(web).post("", pa.message("#slow please")).json()["conversation_id"]
    stream = pa.at(web).stream(busy)
    next(data for name, _, data in stream if name == "text-delta")  # its one place is taken
    stream.close()
    held = pa.at(web).post("", pa.message("hello")).json()["conversation_id"]
    eventually(lambda: broker.llen(queue) == 0, timeout=10, what="worker-1 to take the message")
    assert broker.exists("unacked", "unacked_index") == 0
    mp.kill("worker-1")

    mp.worker("worker-2")
    for conversation_id, text in [(held, "You said: hello"), (busy, "Let me check that for you.")]:
        events = pa.at(web).events_until(conversation_id, _settled, timeout=60)
        assert [m["text"] for m in company_messages(events)] == [text]


def test_a_restarted_worker_takes_up_what_the_dead_one_left(mp: Cluster):
    web = mp.web("web")
    mp.worker("worker-1")
    pa = PersonalAgent()
    conversation_id = pa.at(web).post("", pa.message("#slow please")).json()["conversation_id"]
    stream = pa.at(web).stream(conversation_id)
    next(data for name, _, data in stream if name == "text-delta")
    stream.close()
    mp.kill("worker-1")
    mp.sessions_ended("worker-1")  # what it had sent is committed or rolled back by now
    assert company_messages(pa.at(web).all_events(conversation_id)) == []
    mp.worker("worker-2")  # the only worker, started after the death
    events = pa.at(web).events_until(conversation_id, _settled, timeout=60)
    assert [m["text"] for m in company_messages(events)] == ["Let me check that for you."]


def test_a_poison_message_is_answered_after_bounded_attempts(mp: Cluster):
    web = mp.web("web")
    pa = PersonalAgent()
    first = {"message": {"id": f"poison-{time.monotonic_ns()}", "sender": "agent", "text": "hi"}}
    conversation_id = pa.at(web).post("", first).json()["conversation_id"]
    deaths = 0

    def answered() -> list[dict[str, Any]] | None:
        """One poison worker at a time, a new one when it died; the events once settled."""
        nonlocal deaths
        events = pa.at(web).all_events(conversation_id)
        if _settled(events):
            return events
        name = f"worker-{deaths}"
        if name not in mp.processes:
            mp.worker(name, app="tests.multiprocess.poison_worker")
        elif mp.processes[name].poll() is not None:
            mp.processes.pop(name)
            deaths += 1
        return None

    events = eventually(answered, timeout=120, what="the poison message answered")
    (reply,) = company_messages(events)
    assert reply["text"] == FAILED
    assert deaths == 3  # TURN_MAX_ATTEMPTS: the fourth worker answers without trying again
    # The conversation goes on.
    assert pa.at(web).post(f"/{conversation_id}/messages", pa.message("hello")).status_code == 202
    events = pa.at(web).events_until(
        conversation_id, lambda evs: len(company_messages(evs)) == 2 and _settled(evs)
    )
    assert company_messages(events)[-1]["text"] == "You said: hello"


APPROVE = """
from poppy_django.desk import decisions
from poppy_django.models import ActionRecord
record = ActionRecord.objects.create(
    conversation_id="{conversation_id}", call_key="approved-1", tool="cancel_order",
    arguments={{"order_id": "A-2"}}, summary="Cancel order A-2", actor_id="acct-1",
    account_id="acct-1", roles=["personal_agent", "scope:poppy:write"],
    status="awaiting_approval",
)
decisions.approve(record.pk, by="sam", request_id="req-approve-mp")
"""


def test_an_approval_whose_worker_dies_mid_action_runs_once(mp: Cluster):
    web = mp.web("web")
    mp.worker("dying", app="tests.multiprocess.dying_mid_action")
    pa = PersonalAgent(account_id="acct-1", scopes=("poppy:read", "poppy:write"))
    conversation_id = pa.at(web).post("", pa.message("hello")).json()["conversation_id"]
    pa.at(web).events_until(conversation_id, _settled)
    mp.manage("shell", "-c", APPROVE.format(conversation_id=conversation_id))

    mp.exited("dying")
    # Died inside the tool: nothing of the action committed, and nothing was told.
    assert _query(mp, "SELECT status FROM shop_order WHERE id = 'A-2'") == [("processing",)]
    assert len(company_messages(pa.at(web).all_events(conversation_id))) == 1

    mp.worker("worker-2")
    events = pa.at(web).events_until(
        conversation_id, lambda evs: len(company_messages(evs)) == 2, timeout=60
    )
    outcome = company_messages(events)[-1]
    assert outcome["text"] == "Done: Cancel order A-2."
    assert outcome["data"]["actions"][0]["status"] == "succeeded"
    assert _query(mp, "SELECT status FROM shop_order WHERE id = 'A-2'") == [("cancelled",)]
    assert _query(
        mp,
        "SELECT count(*) FROM poppy_django_event WHERE meta->>'request_id' = 'req-approve-mp'",
    ) == [(1,)]
    assert _query(mp, "SELECT status, attempts FROM poppy_django_actionrecord") == [
        ("succeeded", 2)
    ]
