"""The turn engine under each Celery pool it supports, with LLM-shaped turns.

Real uvicorn, real Celery workers, the LLM-shaped local endpoint (pydantic-ai's OpenAI chat
model over httpx): N conversations started at once are all answered, many model calls are in
flight at once in one worker (the endpoint counts its open streams), and no turn waits for a
lease to expire (the recovery sweep never takes one up). gevent/eventlet refuse to start.
"""

from __future__ import annotations

import os
import signal
import threading
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from poppy_django import tasks
from tests.agents import PersonalAgent, company_messages
from tests.multiprocess.cluster import Cluster
from tests.waiting import eventually

pytestmark = pytest.mark.multiprocess

#: Conversations started at once; each turn streams ~1.5 s (1 s to the first token).
AT_ONCE = 24


def _settled(events: list[dict[str, Any]]) -> bool:
    return bool(events) and events[-1]["type"] == "state" and events[-1]["status"] == "idle"


@pytest.mark.parametrize(
    "options",
    [
        pytest.param(["--pool=prefork", "--concurrency=2"], id="prefork"),
        pytest.param(["--pool=threads", "--concurrency=4"], id="threads"),
        pytest.param(["--pool=solo"], id="solo"),
    ],
)
def test_one_worker_keeps_many_llm_turns_in_flight(mp: Cluster, options: list[str]) -> None:
    llm = mp.llm(ttft=1.0, tokens=10, rate=20)
    web = mp.web("web")
    mp.worker("worker", options=options)
    people = [PersonalAgent() for _ in range(AT_ONCE)]
    started: list[tuple[PersonalAgent, str]] = []
    lock = threading.Lock()

    def start(pa: PersonalAgent, n: int) -> None:
        conversation_id = pa.at(web).post("", pa.message(f"hello {n}")).json()["conversation_id"]
        with lock:
            started.append((pa, conversation_id))

    starters = [threading.Thread(target=start, args=(pa, n)) for n, pa in enumerate(people)]
    for starter in starters:
        starter.start()
    for starter in starters:
        starter.join(60)
    assert len(started) == AT_ONCE
    for pa, conversation_id in started:
        (reply,) = company_messages(pa.at(web).events_until(conversation_id, _settled, timeout=90))
        assert reply["text"].startswith("You said: hello "), mp.log("worker")
    served = httpx.get(f"{llm}/stats").json()
    assert served["requests"] == AT_ONCE and served["open"] == 0
    # Far more model calls in flight at once than the pool's concurrency.
    assert served["max_open"] >= AT_ONCE // 2, served
    log = mp.log("worker")
    assert "left without a writer" not in log
    assert "Traceback" not in log


@pytest.mark.parametrize("pool", ["gevent", "eventlet"])
def test_a_worker_with_a_pool_the_engine_cannot_run_refuses_to_start(pool: str) -> None:
    with pytest.raises(SystemExit) as refused:
        tasks._check_pool(sender=SimpleNamespace(pool_cls=pool))
    assert f"the Celery pool {pool!r} cannot run turns" in str(refused.value)
    assert "--pool prefork, threads or solo" in str(refused.value)


@pytest.mark.parametrize("pool", ["prefork", "threads", "solo", "processes"])
def test_the_supported_pools_start(pool: str) -> None:
    tasks._check_pool(sender=SimpleNamespace(pool_cls=pool))


def test_a_prefork_worker_s_warm_shutdown_finishes_the_turns_in_flight(mp: Cluster) -> None:
    """SIGTERM to the worker (a warm shutdown): its pool child finishes the turn its engine
    holds before it exits. No other worker runs, so a turn left behind would never be
    answered (nothing would take it up)."""
    llm = mp.llm(ttft=2.0, tokens=10, rate=20)
    web = mp.web("web")
    worker = mp.worker("worker", options=["--pool=prefork", "--concurrency=1"])
    pa = PersonalAgent().at(web)
    conversation_id = pa.post("", pa.message("hello")).json()["conversation_id"]
    # the model call is in flight
    eventually(lambda: httpx.get(f"{llm}/stats").json()["open"] >= 1, timeout=30)
    os.kill(worker.pid, signal.SIGTERM)  # the worker alone, not its process group
    assert worker.wait(timeout=60) == 0
    events = pa.all_events(conversation_id)
    (reply,) = company_messages(events)
    assert reply["text"].startswith("You said: hello")
    assert _settled(events)
