"""Metrics and traces of the example project as shipped, in production mode: ``uvicorn
--workers 2``, Celery prefork ``-c 2``, PostgreSQL, Redis, the SDK turned on by the standard
OTEL_* variables the project reads (``POPPY["OPENTELEMETRY"]``), Prometheus's scrape of
``/metrics`` adding up every process's files (``PROMETHEUS_MULTIPROC_DIR``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.agents import PersonalAgent
from tests.multiprocess.cluster import Cluster, cluster
from tests.otlp_receiver import Received, ReceivedSpan, receiving
from tests.waiting import eventually

pytestmark = pytest.mark.multiprocess

PREFORK = ["--pool=prefork", "--concurrency=2"]


@pytest.fixture
def observed(tmp_path: Path) -> Iterator[tuple[Cluster, Received]]:
    with receiving() as (endpoint, received), cluster(tmp_path) as running:
        running.env.update(
            OTEL_SERVICE_NAME="acme",
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=endpoint,
            OTEL_BSP_SCHEDULE_DELAY="200",
            OTEL_METRICS_EXPORTER="prometheus_multiprocess",
            OTEL_METRIC_EXPORT_INTERVAL="500",
            PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
        )
        yield running, received


def scrape(web: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics``: (name, sorted labels) → value."""
    answer = httpx.get(f"{web}/metrics", timeout=30)
    assert answer.status_code == 200, answer.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


#: OTLP's span kind of a client's request.
CLIENT = 3
#: The messages route's label: its URL pattern, as every route's.
MESSAGES = "/poppy/conversations/{conversation_id}/messages"


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(
        found
        for (sample, sample_labels), found in samples.items()
        if sample == name and set(labels.items()) <= set(sample_labels)
    )


def _settled(events: list[dict[str, Any]]) -> bool:
    return bool(events) and events[-1]["type"] == "state" and events[-1]["status"] == "idle"


def _converse(web: str, texts: list[str], long_poll: bool = False) -> tuple[PersonalAgent, str]:
    """One conversation, each message answered before the next: one turn each (read by
    long-polls: a waiting read that the reply's nudge wakes)."""
    pa = PersonalAgent()
    conversation = pa.at(web).post("", pa.message(texts[0])).json()["conversation_id"]
    pa.at(web).events_until(conversation, _settled, long_poll=long_poll)
    for text in texts[1:]:
        assert pa.at(web).post(f"/{conversation}/messages", pa.message(text)).status_code == 202
        pa.at(web).events_until(conversation, _settled, long_poll=long_poll)
    return pa, conversation


def _descendants(spans: list[ReceivedSpan], root: ReceivedSpan) -> list[ReceivedSpan]:
    below, frontier = [], [root.span_id]
    while frontier:
        children = [span for span in spans if span.parent_id in frontier]
        below += children
        frontier = [span.span_id for span in children]
    return below


def test_metrics_and_a_trace_from_the_post_to_the_model_call(
    observed: tuple[Cluster, Received],
) -> None:
    mp, received = observed
    mp.server_workers = 2
    web = mp.web("web")

    # A scripted conversation (the example's offline model): two turns.
    mp.worker("scripted", options=PREFORK)
    _converse(web, ["hi", "where is my order?"])
    eventually(
        lambda: value(scrape(web), "poppy_turns_total", outcome="answered") == 2,
        what="the scripted turns counted",
    )
    mp.stop("scripted")

    # An LLM-shaped conversation through pydantic-ai: a reply, then a tool call.
    llm = mp.llm(ttft=0.05, tokens=6, rate=100)
    mp.worker("llm-worker", options=PREFORK)
    pa, conversation = _converse(web, ["hi", "hello there", "store_hours?"], long_poll=True)
    served = httpx.get(f"{llm}/stats").json()

    def counted() -> dict[Any, float] | None:
        samples = scrape(web)
        done = value(samples, "poppy_turns_total", outcome="answered") == 5
        # Each process's counts as of its last export (every 500 ms here): the web
        # processes' requests too.
        served = value(samples, "poppy_request_duration_seconds_count", route=MESSAGES) == 3
        return samples if done and served and value(samples, "poppy_turns_in_flight") == 0 else None

    samples = eventually(counted, what="five answered turns and none in flight")
    assert value(samples, "poppy_turns_total") == 5  # no failed or lost turn
    assert value(samples, "poppy_turn_duration_seconds_count") == 5
    assert value(samples, "poppy_turn_start_delay_seconds_count") == 5
    assert value(samples, "poppy_model_duration_seconds_count", model="local") == served["requests"]
    # The local model reports 10 prompt tokens a request and the tokens it wrote.
    tokens_in = value(samples, "poppy_model_tokens_total", model="local", direction="input")
    assert tokens_in == 10 * served["requests"]
    assert value(samples, "poppy_model_tokens_total", model="local", direction="output") > 0
    assert value(samples, "poppy_request_duration_seconds_count", route=MESSAGES) == 3
    # The database's gauges as of their last read (each interval, off the collection).
    samples = eventually(
        lambda: (
            (found := scrape(web))
            and value(found, "poppy_conversations", status="idle") == 2
            and found
        ),
        what="the database's gauges read after the turns",
    )
    assert value(samples, "poppy_handoffs_waiting") == 0
    assert value(samples, "poppy_engine_heartbeat_time_seconds") > 0
    assert not [key for key in samples if "conversation" in dict(key[1])]  # no id labels

    # Every line of a turn names its request and trace: the model client's (httpx), and
    # Celery's own about the task (received, in the worker's parent; succeeded, in a child),
    # not only the app's.
    logged = (mp.tmp / "llm-worker.log").read_text(errors="replace").splitlines()
    for said in ("HTTP Request: POST", "] received", "succeeded in"):
        lines = [line for line in logged if said in line]
        assert lines, said
        assert all(re.search(r"\[request req_\w+ trace [0-9a-f]{32}\]", line) for line in lines), [
            line for line in lines if "[request req_" not in line
        ]

    # A refusal is counted by its code.
    stranger = PersonalAgent()
    assert stranger.at(web).get(f"/{conversation}/events").status_code == 404
    eventually(
        lambda: value(scrape(web), "poppy_refusals_total", code="conversation_not_found") == 1,
        what="the refusal counted",
    )

    # One trace from the POST of "store_hours?" through the worker to the model and the tool.
    def traced() -> tuple[ReceivedSpan, list[ReceivedSpan]] | None:
        spans = received.snapshot()
        posts = [s for s in spans if s.name == "POST messages"]
        for post in posts:
            below = _descendants(spans, post)
            if {"poppy.tool", "poppy.commit"} <= {span.name for span in below}:
                return post, below
        return None

    post, below = eventually(traced, timeout=30, what="the message's whole trace")
    names = [span.name for span in below]
    for expected in ("poppy.dispatch", "poppy.task", "poppy.turn", "poppy.model", "poppy.tool"):
        assert expected in names, names
    by_id = {span.span_id: span for span in [post, *below]}

    def parent(span: ReceivedSpan) -> str:
        return by_id[span.parent_id].name

    # Celery's instrumentation carries the trace through the broker: its publish and run
    # spans between the app's dispatch and its task.
    task = next(span for span in below if span.name == "poppy.task")
    chain, at = [], task
    while at.parent_id in by_id:
        at = by_id[at.parent_id]
        chain.append(at.name)
    assert chain == [
        "run/poppy_django.run_turns",
        "apply_async/poppy_django.run_turns",
        "poppy.dispatch",
        "POST messages",
    ], chain
    assert post.attributes["poppy.conversation_id"] == conversation
    turn = next(span for span in below if span.name == "poppy.turn")
    assert parent(turn) == "poppy.task"  # carried from the task onto the engine's loop
    models = [span for span in below if span.name == "poppy.model"]
    assert len(models) == 2 and all(parent(span) == "poppy.turn" for span in models)
    assert all(span.attributes["gen_ai.usage.input_tokens"] == 10 for span in models)
    # Each model request is the HTTP client's span too, under its poppy.model: the maintained
    # httpx instrumentation's httpx2 instrumentor (the model client speaks through httpx2).
    calls = [span for span in below if span.kind == CLIENT and parent(span) == "poppy.model"]
    assert len(calls) == len(models), [(span.name, span.attributes) for span in below]
    assert all(span.name == "POST" for span in calls), calls
    assert {span.parent_id for span in calls} == {span.span_id for span in models}
    assert parent(next(span for span in below if span.name == "poppy.commit")) == "poppy.turn"
    # The database's statements and Redis's commands are the maintained instrumentations'
    # (psycopg, redis), in the trace with the app's spans.
    systems = {span.attributes.get("db.system") for span in below}
    assert {"postgresql", "redis"} <= systems, systems
    # A waiting read that the reply woke links to the commit that wrote it.
    commits = {s.span_id for s in received.snapshot() if s.name == "poppy.commit"}
    reads = [s for s in received.snapshot() if s.name == "GET events" and s.links]
    assert any(span_id in commits for read in reads for _, span_id in read.links)
    # Ids, sizes and outcomes only: nothing the User wrote is on any span.
    everything = repr([(s.attributes, s.events) for s in received.snapshot()])
    assert "store_hours?" not in everything and "hello there" not in everything


def test_a_worker_killed_mid_turn_shows_as_a_take_up(observed: tuple[Cluster, Received]) -> None:
    """The metrics of a crash: the dead worker's turn in flight is gone from the sum (it runs
    nowhere), the survivor's take-up is counted, the turn is answered once; the survivor's
    turn names the message's request id and links to its trace (the task that carried them
    died with the worker)."""
    mp, received = observed
    web = mp.web("web")
    mp.worker("doomed")
    pa = PersonalAgent()
    started = pa.at(web).post("", pa.message("#slow please"))
    conversation, request_id = started.json()["conversation_id"], started.headers["X-Request-ID"]
    stream = pa.at(web).stream(conversation)
    next(data for name, _, data in stream if name == "text-delta")  # mid-reply
    stream.close()
    eventually(lambda: value(scrape(web), "poppy_turns_in_flight") == 1, what="the turn in flight")
    mp.kill("doomed")
    assert value(scrape(web), "poppy_turns_in_flight") == 0  # a dead process runs nothing

    mp.worker("survivor")
    pa.at(web).events_until(conversation, _settled, timeout=60)

    def counted() -> dict[Any, float] | None:
        samples = scrape(web)
        answered = value(samples, "poppy_turns_total", outcome="answered") == 1
        return samples if answered and value(samples, "poppy_turns_in_flight") == 0 else None

    samples = eventually(counted, what="the turn answered by the survivor")
    assert value(samples, "poppy_leases_taken_up_total") == 1
    assert value(samples, "poppy_turns_total") == 1
    finished = [line for line in mp.log("survivor").splitlines() if "turn_finished" in line]
    assert finished and f"request_id={request_id}" in finished[-1], mp.log("survivor")

    def taken_up_turn() -> ReceivedSpan | None:
        with received.lock:
            posted = [span for span in received.spans if span.name == "POST conversations"]
            turns = [span for span in received.spans if span.name == "poppy.turn"]
        traces = {span.trace_id for span in posted}
        linked = [turn for turn in turns if {trace for trace, _ in turn.links} & traces]
        return linked[0] if linked else None

    turn = eventually(taken_up_turn, what="the survivor's turn linked to the POST's trace")
    assert turn.trace_id not in {trace for trace, _ in turn.links}  # a trace of its own
