"""PostgreSQL hung (every process of a private server SIGSTOPped) under the example project as
shipped, its SDK on: the processes go on exporting their metrics (the database's gauges are
read off the collection, and keep their last values with the time they were read), the
worker's heartbeat stays fresh, and ``manage.py poppy_worker_probe`` answers and exits.
Before it, a message sent while no worker runs waits in the broker's queue, and the queue's
depth says so until a worker takes it.

The alerts, replayed by promtool on the series scraped while the database hung
(tests/alert_replay.py): ``PoppyDatabaseUnreachable`` fires, after its bound, and nothing
else — ``PoppyNoWorkerHeartbeat`` above all (it fired falsely when a hung database froze
every process's export)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests import private_postgres
from tests.agents import PersonalAgent
from tests.alert_replay import Recorder, firing
from tests.multiprocess.cluster import ROOT, Cluster
from tests.waiting import eventually

pytestmark = pytest.mark.multiprocess


def _scrape(web: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = httpx.get(f"{web}/metrics", timeout=10)
    assert answer.status_code == 200, answer.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def _database_read_at(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> float:
    """The latest read of the database's gauges by any process (each says its own, by pid)."""
    return max(
        (
            value
            for (name, labels), value in samples.items()
            if name == "poppy_gauges_read_time_seconds" and ("source", "database") in labels
        ),
        default=0.0,
    )


def _queued(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], queue: str) -> float:
    return samples.get(("poppy_broker_queue_depth", (("queue", queue),)), -1.0)


def _heartbeat(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> float:
    """The latest beat of any engine (each says its own, by pid)."""
    return max(
        (
            value
            for (name, _), value in samples.items()
            if name == "poppy_engine_heartbeat_time_seconds"
        ),
        default=0.0,
    )


def test_a_hung_database_freezes_no_metrics_no_heartbeat_and_no_probe(
    mp: Cluster, tmp_path: Path
) -> None:
    with private_postgres.running() as server:
        with psycopg.connect(server.url("postgres"), autocommit=True) as admin:
            admin.execute("CREATE DATABASE acme")
        env = {
            "DATABASE_URL": server.url("acme"),
            "OTEL_METRICS_EXPORTER": "prometheus_multiprocess",
            "OTEL_METRIC_EXPORT_INTERVAL": "500",
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
        }
        mp.env.update(env)
        mp.manage("migrate", "-v0")
        web = mp.web("web")
        queue = mp.env["POPPY_CELERY_QUEUE"]
        pa = PersonalAgent()
        assert pa.at(web).start("hello").status_code == 201
        eventually(lambda: _queued(_scrape(web), queue) == 1, what="the turn queued, counted")
        mp.worker("worker")
        eventually(lambda: _queued(_scrape(web), queue) == 0, what="the queue drained")
        eventually(
            lambda: _database_read_at(_scrape(web)) > 0 and _heartbeat(_scrape(web)) > 0,
            what="the gauges read and the heartbeat exported",
        )

        recorder = Recorder(f"{web}/metrics", step=0.5)
        with server.hung(), recorder.running():
            hung_at = time.time()
            # Each process exports on: its heartbeat gauge moves past the hang, read from
            # a file written after it, while the database's reads stay before it.
            samples = eventually(
                lambda: (found := _scrape(web)) and _heartbeat(found) > hung_at + 2 and found,
                timeout=60,
                what="the worker's heartbeat exported while the database hangs",
            )
            # (A read already answered when the server stopped may stamp its time just after.)
            assert _database_read_at(samples) < hung_at + 1
            # The database's gauges keep their last values rather than vanishing.
            assert ("poppy_turns_past_bound", ()) in samples

            probe = subprocess.run(
                [sys.executable, str(ROOT / "manage.py"), "poppy_worker_probe"],
                env=mp.env,
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,  # a bound, not a timing: it hung at exit for good before
            )
            assert probe.returncode == 0, probe.stderr
            assert "engine(s)" in probe.stdout
            # Still exported: the heartbeat moves on (the probe may take less than the
            # heartbeat's interval, so a scrape at once could show the same beat)...
            later = eventually(
                lambda: (
                    (found := _scrape(web)) and _heartbeat(found) > _heartbeat(samples) and found
                ),
                timeout=30,
                what="the heartbeat exported again after the probe",
            )
            # ...and the reads still stopped (each process's last one: the scrape shows the
            # process that exported last).
            assert _database_read_at(later) < hung_at + 1

        # Were the database to stay hung: the one alert, within its bound (three minutes
        # without a read, then one minute pending), counted from the hang.
        fired = firing(recorder.recording, minutes_after=10)
        assert set(fired) == {"PoppyDatabaseUnreachable"}, fired
        assert 180 <= fired["PoppyDatabaseUnreachable"] <= 270, fired
        print(f"\nPostgreSQL hung: alerts fired (seconds from the hang): {fired}")

        eventually(
            lambda: _database_read_at(_scrape(web)) > hung_at,
            timeout=60,
            what="the gauges to read again once the database answers",
        )
