"""Production's bad day (issue 50), on the example project as shipped (uvicorn, Celery
``prefork -c 2``, Redis) and a PostgreSQL server of the test's own, which it may fill, stop
or hang.

The connection burst: staff with the desk open and bursts of readiness probes leave each
process within its pool's bound, with no answer 5xx; a request that gets no connection in
time is a 503 with ``Retry-After`` (JSON for a script, a page for a person), never a 500.

Each scenario's alert column: ``/metrics`` recorded through it and replayed to promtool with
the deployment's rules (tests/alert_replay.py), each series continued as it was going.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from tests import private_postgres
from tests.alert_replay import Recorder, firing
from tests.multiprocess import burst
from tests.multiprocess.cluster import Cluster
from tests.waiting import eventually

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(600)]

STAFF = [f"staff{n}" for n in range(6)]
#: The example project's default pool: DATABASE_POOL_MAX_SIZE.
MAX_SIZE = 10


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One deployment on a private PostgreSQL server: six desk staff, a worker."""
    with private_postgres.running() as server:
        folder = Path(tmp_path_factory.mktemp("bad-day"))
        metrics = {
            "OTEL_METRICS_EXPORTER": "prometheus_multiprocess",
            "OTEL_METRIC_EXPORT_INTERVAL": "1000",
            "PROMETHEUS_MULTIPROC_DIR": str(folder / "metrics"),
        }
        cluster = Cluster(folder, pg_port=server.port, env=metrics)
        cluster.create()
        try:
            burst.add_staff(cluster, STAFF)
            cluster.worker("worker", options=["--pool=prefork", "--concurrency=2"])
            yield cluster
        finally:
            cluster.destroy()


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
    web = site.web("tight", env={"DATABASE_POOL_MAX_SIZE": "1", "DATABASE_POOL_TIMEOUT": "1"})
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
