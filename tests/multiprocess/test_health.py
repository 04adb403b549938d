"""The probes of the example project as shipped (uvicorn, Celery, PostgreSQL, its own Redis):
readiness names the part that is down, the worker probe follows its host's engines."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import httpx
import psycopg
import pytest

from tests import private_postgres
from tests.multiprocess.cluster import ROOT, Cluster, free_port
from tests.waiting import eventually

pytestmark = pytest.mark.multiprocess


def _ready(web: str) -> tuple[int, dict[str, Any]]:
    answer = httpx.get(f"{web}/health/ready", timeout=30)
    return answer.status_code, answer.json()


def _failing(web: str, expected: list[str]) -> dict[str, Any]:
    """The readiness answer once it is 503 naming exactly ``expected``."""

    def answered() -> dict[str, Any] | None:
        status, body = _ready(web)
        return body if status == 503 and body["failing"] == expected else None

    return eventually(answered, timeout=30, what=f"readiness to fail on {expected}")


def test_readiness_names_the_part_that_is_down(mp: Cluster) -> None:
    web = mp.web("web")
    assert httpx.get(f"{web}/health/live").json() == {"status": "alive"}
    status, body = _ready(web)
    assert status == 200, body
    assert body["status"] == "ready" and body["failing"] == []
    assert list(body["checks"]) == ["database", "migrations", "cache", "redis", "broker"]
    assert all(check["ok"] and check["seconds"] >= 0 for check in body["checks"].values())

    # The app's newest migration unapplied: not ready until it is applied again.
    mp.manage("migrate", "poppy_django", "0012", "-v0")
    body = _failing(web, ["migrations"])
    assert "unapplied migration(s) of poppy_django: 0013_" in body["checks"]["migrations"]["error"]
    mp.manage("migrate", "poppy_django", "-v0")
    assert eventually(lambda: _ready(web)[0] == 200, what="ready after migrating")

    # Redis down: the cache, the fan-out and the broker (all on it here) are named.
    mp.stop_redis()
    body = _failing(web, ["cache", "redis", "broker"])
    assert "redis" in body["checks"]["redis"]["error"].lower()
    mp.start_redis()
    assert eventually(lambda: _ready(web)[0] == 200, what="ready once Redis is back")

    # A web process whose broker is unreachable (routing: a port where nothing listens).
    cut_off = mp.web("cut-off", env={"CELERY_BROKER_URL": f"redis://127.0.0.1:{free_port()}/0"})
    _failing(cut_off, ["broker"])

    # The cluster's database gone (dropped): the database and its migrations are named.
    mp.pg(f'DROP DATABASE "{mp.name}" WITH (FORCE)')
    body = _failing(web, ["database", "migrations"])
    assert "OperationalError" in body["checks"]["database"]["error"]
    assert mp.name not in str(body)  # described without the driver's message


def test_readiness_follows_the_database_server_stopping_and_starting(mp: Cluster) -> None:
    """A PostgreSQL server of its own, stopped at once under the running web process (as a
    crash looks) and started again: not ready while it is down, ready again after."""
    with private_postgres.running() as server:
        with psycopg.connect(server.url("postgres"), autocommit=True) as admin:
            admin.execute("CREATE DATABASE acme")
        url = server.url("acme")
        mp.manage("migrate", "-v0", env={"DATABASE_URL": url})
        web = mp.web("web", env={"DATABASE_URL": url})
        assert eventually(lambda: _ready(web)[0] == 200, what="ready on the private server")

        server.stop()
        body = _failing(web, ["database", "migrations"])
        assert "OperationalError" in body["checks"]["database"]["error"]
        assert str(server.port) not in str(body)  # described without the driver's message

        server.start()
        assert eventually(lambda: _ready(web)[0] == 200, what="ready once PostgreSQL is back")


def _probe(mp: Cluster) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "poppy_worker_probe", "--within", "3"],
        env=mp.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_worker_probe_follows_this_hosts_engines(mp: Cluster) -> None:
    assert _probe(mp).returncode == 1  # no engine has started on this host yet
    mp.worker("first", options=["--pool=prefork", "--concurrency=2"])
    passed = eventually(lambda: (p := _probe(mp)).returncode == 0 and p, what="the probe")
    assert "2 engine(s)" in passed.stdout  # each prefork child runs an engine and beats

    mp.kill("first")
    failed = _probe(mp)
    assert failed.returncode == 1
    assert "no live engine" in failed.stderr and "gone" in failed.stderr

    mp.worker("second", options=["--pool=prefork", "--concurrency=2"])
    eventually(lambda: _probe(mp).returncode == 0, what="the probe to pass with the new worker")
