"""Production's bad day (issue 50), on the example project as shipped (uvicorn, Celery
``prefork -c 2``, Redis, its OpenTelemetry SDK writing Prometheus's multiprocess files, the
LLM-shaped local model) and a PostgreSQL server of the test's own, which it fills, stops,
restarts or hangs.

The connection burst: staff with the desk open and bursts of readiness probes leave each
process within its pool's bound, with no answer 5xx, and pages no one (its ``/metrics``
recorded and replayed to promtool with the deployment's rules, tests/alert_replay.py); a
request that gets no connection in time is a 503 with ``Retry-After`` (JSON for a script, a
page for a person), never a 500.

Then the campaign, one dependency broken at a time (:mod:`tests.multiprocess.bad_day`):
PostgreSQL stopped under a turn in flight, restarted under one, hung; Redis stopped; the
broker wrong on one web process; the worker stopped; a worker on the wrong queue. For each:
what readiness says, which alerts fire and after how long (the metrics recorded during the
outage, replayed to promtool as if it lasted), what the logs say, and that every message
acknowledged (201) is answered exactly once after recovery, the refused ones (503) sent
again. Each scenario's row goes to var/bad-day/campaign.json, the table in
docs/operations.md#a-bad-day-scenario-by-scenario.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests import private_postgres
from tests.alert_replay import Recorder, firing
from tests.multiprocess import bad_day, burst
from tests.multiprocess.cluster import ROOT, Cluster, free_port
from tests.waiting import eventually

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(900)]

STAFF = [f"staff{n}" for n in range(6)]
#: The example project's default pool: DATABASE_POOL_MAX_SIZE.
MAX_SIZE = 10
#: Seconds each outage is recorded for (the alerts' replay continues it as it was going), a
#: message sent every :data:`SEND_EVERY` seconds meanwhile.
OUTAGE_SECONDS = 6.0
SEND_EVERY = 2.0
FAILED = "Sorry, something went wrong on our side. Please try again."
#: The campaign's rows, written out when the module ends.
ROWS: list[dict[str, Any]] = []


@pytest.fixture(scope="module")
def server() -> Iterator[private_postgres.PrivatePostgres]:
    with private_postgres.running() as running:
        yield running


@pytest.fixture(scope="module")
def site(
    server: private_postgres.PrivatePostgres, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """One deployment on a private PostgreSQL server: six desk staff, a worker, the SDK on."""
    tmp = Path(tmp_path_factory.mktemp("bad-day"))
    sdk = {
        "OTEL_METRICS_EXPORTER": "prometheus_multiprocess",
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRIC_EXPORT_INTERVAL": "500",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp / "metrics"),
        "POPPY_SWEEP_SECONDS": "2",
    }
    (tmp / "metrics").mkdir()
    cluster = Cluster(tmp, pg_port=server.port, env=sdk)
    cluster.create()
    try:
        burst.add_staff(cluster, STAFF)
        # Turns as LLM turns: a first token after 1.5 s, then 10 tokens at 20 a second.
        cluster.llm(ttft=1.5, tokens=10, rate=20.0)
        cluster.worker("worker", options=["--pool=prefork", "--concurrency=2"])
        yield cluster
    finally:
        cluster.destroy()
        if ROWS:
            out = ROOT / "var" / "bad-day" / "campaign.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(ROWS, indent=2))


#: The held pool's web process exports no metrics: its gauges' reads would take the one
#: pooled connection the test holds.
NO_METRICS = {"OTEL_METRICS_EXPORTER": "none"}


def test_the_burst_keeps_each_process_within_its_pool(site: Cluster) -> None:
    web = site.web("web")
    recorder = Recorder(f"{web}/metrics", step=1.0)
    with recorder.running():
        figures = burst.run(site, web, STAFF, seconds=12, probes=25, every=2.0)
    seen = figures.as_json()
    # The burst pages no one about a dependency or a process, were it to last.
    fired = firing(recorder.recording, minutes_after=10)
    print(f"\nthe burst: alerts fired (seconds from its start): {fired}")
    assert not set(fired) & {
        "PoppyDatabaseUnreachable",
        "PoppyRedisUnreachable",
        "PoppyNoWorkerHeartbeat",
        "PoppyTargetDown",
        "PoppyServerErrors",
    }, fired
    assert figures.samples > 10, seen
    assert figures.answers[("readiness", 200)] > 0, seen
    assert figures.answers[("desk rows", 200)] > 0, seen
    assert figures.five_hundreds() == {} and not figures.failures, seen
    assert figures.peak["web"] <= MAX_SIZE, seen
    # The worker's two prefork children, each its own pool, and the worker itself.
    assert figures.peak["worker"] <= 2 * MAX_SIZE + 1, seen
    site.stop("web")


def test_a_request_that_gets_no_connection_in_time_is_a_503(site: Cluster) -> None:
    """A process whose one pooled connection is held (its request waits on a table lock the
    test holds): the next requests wait the pool's timeout, then 503, never a 500."""
    tight = {"DATABASE_POOL_MAX_SIZE": "1", "DATABASE_POOL_TIMEOUT": "1", **NO_METRICS}
    web = site.web("tight", env=tight)
    with burst.desk_session(web, "staff0") as browser:
        held: dict[str, int] = {}
        with psycopg.connect(site.database_url(site.name)) as locker:
            locker.execute("LOCK TABLE poppy_django_conversation IN ACCESS EXCLUSIVE MODE")
            holder = threading.Thread(
                target=lambda: held.update(status=browser.get(burst.DESK).status_code)
            )
            holder.start()
            waiting = (
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tight'"
                " AND wait_event_type = 'Lock'"
            )
            eventually(lambda: site.pg(waiting) == [(1,)], what="the desk's read on the lock")

            script = browser.get(f"{burst.DESK}alerts.json", headers={"Accept": "application/json"})
            page = browser.get(burst.DESK, headers={"Accept": "text/html"})
            probe = httpx.get(f"{web}/health/ready", timeout=30)
            locker.rollback()  # the lock let go: the held request ends
        holder.join(timeout=60)
    assert held == {"status": 200}
    assert script.status_code == 503 and script.headers["Retry-After"] == "5"
    assert script.json() == {
        "error": "temporarily_unavailable",
        "error_description": (
            "The database is busy: no connection was free in time. Try again in 5 seconds."
        ),
    }
    assert page.status_code == 503 and page.headers["Retry-After"] == "5"
    assert "Temporarily unavailable" in page.text and "The database is busy" in page.text
    assert probe.status_code == 503 and probe.json()["failing"] == ["database", "migrations"]
    assert "PoolTimeout" in probe.json()["checks"]["database"]["error"]
    log = (site.tmp / "tight.log").read_text()
    assert "requests reaching database failed" in log and "couldn't get a connection" in log
    assert "Internal Server Error" not in log
    site.stop("tight")


# -- the campaign -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def front(site: Cluster) -> str:
    """The campaign's web process."""
    return site.web("front")


def _turn_started(site: Cluster, sent: bad_day.Sent) -> bool:
    return f"turn_started conversation_id={sent.conversation_id}" in (
        site.tmp / "worker.log"
    ).read_text(errors="replace")


def _outage(watch: bad_day.Watch, failing: str | None) -> None:
    """The outage as a client and a probe meet it: readiness naming ``failing`` (or ready,
    when None), and messages meanwhile, for :data:`OUTAGE_SECONDS`."""
    if failing is not None:
        eventually(
            lambda: failing in watch.probed()[1],
            timeout=30,
            what=lambda: f"readiness to name {failing}: {watch.readiness[-3:]}",
        )
    pause, until = threading.Event(), time.monotonic() + OUTAGE_SECONDS
    while time.monotonic() < until:
        watch.send()
        pause.wait(SEND_EVERY)


def _replied(watch: bad_day.Watch, failed_ok: int = 0) -> None:
    """Each message answered by the model (the LLM-shaped one echoes it); at most
    ``failed_ok`` of them by the failed-turn message."""
    answers = watch.answers()
    failed = [text for text in answers if text == FAILED]
    assert len(failed) <= failed_ok, answers
    assert all(text.startswith("You said: hello") for text in answers if text != FAILED), answers


def _finish(watch: bad_day.Watch, **more: Any) -> dict[str, Any]:
    row = {**watch.row(), **more}
    ROWS.append(row)
    return row


def test_postgresql_stopped_under_a_turn(
    site: Cluster, server: private_postgres.PrivatePostgres, front: str
) -> None:
    with bad_day.watching("PostgreSQL stopped", site, front) as watch:
        in_flight = watch.send()
        assert in_flight.statuses == [201]
        eventually(lambda: _turn_started(site, in_flight), timeout=60, what="its turn started")
        # The fault begins with the stop: the pools see their connections closed and warn
        # while pg_ctl is still waiting for the server to be gone.
        watch.fault()
        server.stop()
        _outage(watch, "database")
    server.start()
    watch.settle()
    # The turn in flight met the database away at its commit (tried twice), was counted as
    # failed, and was answered by the recovery sweep once PostgreSQL came back.
    worker_log = watch.logged_since_fault("worker")
    assert "commit_and_finish met the database out of reach" in worker_log
    assert f"turn_failed conversation_id={in_flight.conversation_id}" in worker_log
    assert "the database connects again" in worker_log
    assert "requests reaching database failed" in watch.logged_since_fault("front")
    # The pool's warning in the server's words, once a streak in each process (the worker's
    # two children and its parent), not at every attempt. Its words are those of the
    # process's first failed attempt: "Connection refused" once the server is gone, "server
    # closed the connection unexpectedly" for an attempt that met its immediate shutdown.
    attempts = re.findall(
        "error connecting in .*(?:Connection refused|server closed the connection)", worker_log
    )
    assert 1 <= len(attempts) <= 3, attempts
    # The turn in flight answered once: by the failed-turn message when the database came
    # back before the recovery sweep took it up again, else by the model; the others by it.
    _replied(watch, failed_ok=1)
    counted = bad_day.scraped(front, "poppy_turns_total", outcome="failed")
    assert counted >= 1, counted
    assert {"PoppyDatabaseUnreachable", "PoppyNotReady"} <= set(watch.alerts), watch.alerts
    assert "PoppyNoWorkerHeartbeat" not in watch.alerts, watch.alerts
    _finish(watch)


def test_postgresql_restarted_under_a_turn(
    site: Cluster, server: private_postgres.PrivatePostgres, front: str
) -> None:
    with bad_day.watching("PostgreSQL restarted under a turn", site, front) as watch:
        in_flight = watch.send()
        eventually(lambda: _turn_started(site, in_flight), timeout=60, what="its turn started")
        watch.fault()
        server.stop()
        server.start()
        restarted = time.time()
        eventually(lambda: watch.probed()[0] == 200, timeout=30, what="ready again")
        watch.send()
        # The recording ends once the database's gauges have read it again for a while (the
        # replay continues them as they went over its last ten seconds; every process says
        # its own last read, under its pid).
        eventually(
            lambda: (
                watch.recorded("poppy_gauges_read_time_seconds", source="database") > restarted + 10
            ),
            timeout=60,
            what="the database's gauges read again",
        )
    watch.settle()
    _replied(watch)
    assert (
        f"turn_failed conversation_id={in_flight.conversation_id}"
        not in watch.logged_since_fault("worker")
    )
    assert watch.alerts == {}, watch.alerts  # a blip pages nobody
    _finish(watch)


def test_postgresql_hung(
    site: Cluster, server: private_postgres.PrivatePostgres, front: str
) -> None:
    # The hang lasts past the recording (the stack closes after the watch): the alerts are
    # those of a hang that goes on.
    with contextlib.ExitStack() as hang, bad_day.watching("PostgreSQL hung", site, front) as watch:
        hang.enter_context(server.hung())
        watch.fault()
        _outage(watch, "database")
    watch.settle()
    refused = [sent.statuses[0] for sent in watch.sent]
    # Every request on the hung database answered, 503 (within the pool's timeout), none
    # left without an answer.
    assert refused and set(refused) == {503}, refused
    # The check of a kept connection gave up on the silent server and closed it mid-query
    # (the requests' streak began in the scenario before: within a minute, not said again).
    web_log = watch.logged_since_fault("front")
    assert "closing returned connection: <psycopg.Connection [ACTIVE]" in web_log, web_log[-2000:]
    assert "PoppyDatabaseUnreachable" in watch.alerts, watch.alerts
    assert not {"PoppyNoWorkerHeartbeat", "PoppyTargetDown"} & set(watch.alerts), watch.alerts
    _finish(watch)


def test_redis_stopped(site: Cluster, front: str) -> None:
    with bad_day.watching("Redis stopped", site, front) as watch:
        site.stop_redis()
        watch.fault()
        _outage(watch, "redis")
    site.start_redis()
    eventually(
        lambda: httpx.get(f"{front}/health/ready", timeout=20).status_code == 200, timeout=60
    )
    watch.send()  # its wake-up is published: the web process's streak ends
    watch.settle()
    assert {"cache", "redis", "broker"} <= {c for _, _, failing in watch.readiness for c in failing}
    # Kept, and answered by the recovery sweep once the broker is back.
    assert {sent.statuses[0] for sent in watch.sent} == {201}
    web_log = watch.logged_since_fault("front")
    assert "could not hand" in web_log and "Connection refused" in web_log
    # The messages' unpublished wake-ups: one warning for the outage, one line at its end.
    assert web_log.count("publishing on Redis failed") == 1, web_log[-3000:]
    assert "could not publish" not in web_log
    assert "publishing on Redis works again" in web_log
    assert "PoppyRedisUnreachable" in watch.alerts, watch.alerts
    _finish(watch)


def test_the_broker_wrong_on_one_web_process(site: Cluster, front: str) -> None:
    # The healthy process answers its orchestrator's probes too: its readiness is reported
    # beside the cut-off one's (never probed, it would report none, and the cut-off process
    # would be every process that reports readiness).
    assert httpx.get(f"{front}/health/ready", timeout=30).status_code == 200
    cut_off = site.web("cut-off", env={"CELERY_BROKER_URL": f"redis://127.0.0.1:{free_port()}/0"})
    try:
        with bad_day.watching("the broker wrong on one web process", site, cut_off) as watch:
            watch.fault()
            _outage(watch, "broker")
        watch.settle()
    finally:
        site.stop("cut-off")
    assert {sent.statuses[0] for sent in watch.sent} == {201}  # kept, answered by the sweep
    assert "could not hand" in watch.logged_since_fault("cut-off")
    # The cut-off process's readiness is its own (a series per pid): the healthy process
    # collecting after it does not hide it from the alert.
    assert {"PoppyBrokerUnreachable", "PoppyNotReady"} <= set(watch.alerts), watch.alerts
    assert "PoppyRedisUnreachable" not in watch.alerts, watch.alerts  # the others reach it
    _finish(watch)


def test_the_worker_stopped(site: Cluster, front: str) -> None:
    with bad_day.watching("the worker stopped", site, front) as watch:
        site.stop("worker")
        watch.fault()
        _outage(watch, None)
    site.worker("worker")  # solo: starts sooner
    watch.settle()
    assert {sent.statuses[0] for sent in watch.sent} == {201}
    assert {status for _, status, _ in watch.readiness} == {200}  # the web can serve
    assert "PoppyNoWorkerHeartbeat" in watch.alerts, watch.alerts
    _finish(watch)


def test_a_worker_on_the_wrong_queue(site: Cluster, front: str) -> None:
    with bad_day.watching("a worker on the wrong queue", site, front) as watch:
        site.stop("worker")
        site.worker("stray", options=["-Q", "another-queue"])
        watch.fault()
        _outage(watch, None)
        watch.settle()  # by the stray worker's recovery sweep, late
    site.stop("stray")
    site.worker("worker")
    # The right worker takes the queued turns, already answered: none answered twice.
    queue = site.env["POPPY_CELERY_QUEUE"]
    eventually(lambda: _depth(site, queue) == 0, timeout=60, what="the queue drained")
    watch.settle()
    assert {sent.statuses[0] for sent in watch.sent} == {201}
    assert "taking up cnv_" in watch.log("stray")  # its recovery sweep answered them
    assert "PoppyBrokerBacklog" in watch.alerts, watch.alerts
    _finish(watch)


def _depth(site: Cluster, queue: str) -> int:
    import redis

    client = redis.Redis(port=site.redis_port)
    try:
        return int(client.llen(queue))
    finally:
        client.close()
