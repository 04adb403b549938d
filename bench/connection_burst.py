"""The connection burst of issue 50: peak PostgreSQL connections, without the pool and with it.

    flock /tmp/poppy-bench.lock .venv/bin/python bench/connection_burst.py [--seconds 40]

The example project in production mode on loopback (tests/multiprocess/cluster.py): one
uvicorn process and one Celery worker (``prefork -c 2``) on a database of their own; six
staff with the desk open (each tab holds the queue's live stream and reads its rows and
alerts every second: tests/multiprocess/burst.py) while bursts of 25 anonymous readiness
probes arrive every 2 s, on a private PostgreSQL server (``max_connections`` 100, its default,
as in the issue; the burst without the pool would fill the machine's shared server). Run
twice, one after the other: with
``DATABASE_POOL=0`` (a connection kept per thread, ``CONN_MAX_AGE`` 60 s: the example project
before the pool) and with the pool as shipped (``DATABASE_POOL_MAX_SIZE``, default 10).

Prints, for each: the most connections PostgreSQL held at once (from ``pg_stat_activity``,
sampled every 0.2 s), in all and by process (``application_name``: ``web``, and ``worker``
for the worker and its children together), and the answers by route and status. Writes
var/bench/connection_burst.json. Results: docs/deployment.md#sizing-the-pools.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.latency import machine
from tests import private_postgres
from tests.multiprocess import burst
from tests.multiprocess.cluster import ROOT, Cluster

STAFF = [f"staff{n}" for n in range(6)]


def measure(pool: bool, args: argparse.Namespace, port: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="poppy-burst-") as tmp:
        env = {"DJANGO_DEBUG": "0", "DATABASE_POOL": "1" if pool else "0"}
        if args.max_size:
            env["DATABASE_POOL_MAX_SIZE"] = str(args.max_size)
        cluster = Cluster(Path(tmp), env=env, pg_port=port)
        cluster.create()
        try:
            burst.add_staff(cluster, STAFF)
            cluster.worker("worker", options=["--pool=prefork", "--concurrency=2"])
            web = cluster.web("web")
            figures = burst.run(
                cluster, web, STAFF, seconds=args.seconds, probes=args.probes, every=2.0
            )
        finally:
            cluster.destroy()
    return figures.as_json()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--probes", type=int, default=25)
    parser.add_argument("--max-size", type=int, default=None, help="DATABASE_POOL_MAX_SIZE")
    parser.add_argument(
        "--max-connections", type=int, default=100, help="the server's (100: its default)"
    )
    args = parser.parse_args()
    info = machine()
    print("machine: " + ", ".join(f"{k}={v}" for k, v in info.items()))
    results: dict[str, Any] = {"machine": info, "args": vars(args), "started": time.time()}
    # A private server: the machine's own is shared, and the burst without the pool fills it.
    with private_postgres.running(max_connections=str(args.max_connections)) as server:
        for pool in (False, True):
            label = "pool" if pool else "no pool (CONN_MAX_AGE=60)"
            results[label] = measure(pool, args, server.port)
    for label in ("no pool (CONN_MAX_AGE=60)", "pool"):
        figures = results[label]
        print(f"\n{label}: peak {figures['peak_total']} connections {figures['peak_connections']}")
        for route, statuses in figures["answers"].items():
            print(f"  {route:12} {statuses}")
        if figures["failures"]:
            print(f"  no answer: {figures['failures']}")
    out = ROOT / "var" / "bench" / "connection_burst.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
