"""Where the web process's CPU goes on a GET events and a POST message (issue 28).

    .venv/bin/python bench/profile_web.py [--requests 300] [--ops read,post,ceiling] [--top 40]

Starts what ``bench/latency.py`` starts (``tests/multiprocess/cluster.py``: a database
``--db``, dropped at the end, and a private Redis; production mode, the example project),
but no servers: requests go through the example project's ASGI application (Django's
``ASGIHandler`` in ``PoppyBodyLimit``) in this process, each with a
real Session Token and a fresh ES256 DPoP proof (``bench/latency.py``'s signer), under
cProfile in every thread (DRF's cycle runs in a worker thread). POSTs are context-only
messages (they start no turn, so no worker is needed); ``ceiling`` is the bare async view of
``bench/ceiling.py`` on the same path (no token, no query). Prints, per op, CPU per request and
the top functions by CPU time (``time.thread_time``: waits cost nothing).

``--compare-reads N``: no profile; N rounds of reads (``--requests`` each, ``--clients`` at
once), alternating a read's row and events in one statement (PostgreSQL's
``reading.snapshot``) and in two (the row, then the events, as other databases read them),
in this one process, so the machine's drift falls on both; CPU and wall ms per read.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import latency  # noqa: E402
from bench.latency import create_without_discovery_checks  # noqa: E402
from tests.multiprocess.cluster import free_port  # noqa: E402

PUBLIC_PORT = 8000


async def call(
    app: Any, method: str, target: str, headers: dict[str, str], body: bytes = b""
) -> tuple[int, bytes]:
    path, _, query = target.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "server": ("127.0.0.1", PUBLIC_PORT),
        "client": ("127.0.0.1", 5000),
        "headers": [
            (b"host", f"127.0.0.1:{PUBLIC_PORT}".encode()),
            (b"content-length", str(len(body)).encode()),
            (b"content-type", b"application/json"),
            *((name.lower().encode(), value.encode()) for name, value in headers.items()),
        ],
    }
    pending = [{"type": "http.request", "body": body, "more_body": False}]
    status: list[int] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status[0], b"".join(chunks)


class AllThreads:
    """cProfile in this thread and in every thread started while it runs."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []

    def _start(self, *args: Any) -> None:
        sys.setprofile(None)
        profile = cProfile.Profile(time.thread_time)  # CPU, not waits
        self.profiles.append(profile)
        profile.enable()

    def __enter__(self) -> AllThreads:
        threading.setprofile(self._start)
        self._start()
        return self

    def __exit__(self, *exc: Any) -> None:
        threading.setprofile(None)  # type: ignore[arg-type]
        for profile in self.profiles:
            profile.disable()

    def stats(self) -> pstats.Stats:
        out = io.StringIO()
        stats = pstats.Stats(self.profiles[0], stream=out)
        for profile in self.profiles[1:]:
            stats.add(profile)
        return stats


async def drive(op: str, requests: int, agent: latency.Agent, public: str) -> None:
    from django.core.handlers.asgi import ASGIHandler

    from bench.ceiling import CEILING_PATH
    from poppy_django.asgi import PoppyBodyLimit

    app = PoppyBodyLimit(ASGIHandler())  # as the example project's asgi.py
    target = latency.Target("in-process", PUBLIC_PORT, public, [agent])
    for number in range(requests):
        # Reads of a 10-event conversation; POSTs go to another (reads stay 4 events).
        conversation = agent.conversations[10 if op == "read" else 11]
        if op == "ceiling":
            status, body = await call(app, "GET", CEILING_PATH, {})
            assert status == 200, body
        elif op == "read":
            path = f"{latency.PATH}/{conversation.id}/events"
            status, body = await call(
                app,
                "GET",
                f"{path}?cursor={conversation.cursor}",
                latency.auth_headers(target, agent, "GET", path),
            )
            assert status == 200, body
        else:
            path = f"{latency.PATH}/{conversation.id}/messages"
            message = {"id": f"p{number}-{time.time_ns()}", "sender": "agent", "context": {"n": 1}}
            status, body = await call(
                app,
                "POST",
                path,
                latency.auth_headers(target, agent, "POST", path),
                json.dumps({"message": message}).encode(),
            )
            assert status == 202, body


def compare_reads(args: argparse.Namespace, agent: latency.Agent, public: str) -> None:
    """Reads with their row and events in one statement and in two, rounds alternated."""
    from poppy_django.store import reading

    def two_statements(conversation_id: str, after: int) -> reading.Snapshot:
        return reading.Snapshot(reading.read_state(conversation_id))  # page_of reads events

    ways = {"one statement": reading.snapshot, "two statements": two_statements}
    per_client = max(1, args.requests // args.clients)

    async def reads() -> None:
        await asyncio.gather(
            *(drive("read", per_client, agent, public) for _ in range(args.clients))
        )

    asyncio.run(drive("read", 20, agent, public))  # warm
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    try:
        for number in range(args.compare_reads):
            order = list(ways.items()) if number % 2 == 0 else list(ways.items())[::-1]
            for name, snapshot in order:
                reading.snapshot = snapshot  # type: ignore[assignment]
                cpu, wall = time.process_time(), time.perf_counter()
                asyncio.run(reads())
                count = per_client * args.clients
                figures[name].append(
                    (
                        (time.process_time() - cpu) * 1000 / count,
                        (time.perf_counter() - wall) * 1000 / count,
                    )
                )
    finally:
        reading.snapshot = ways["one statement"]  # type: ignore[assignment]
    print(f"ms per read, {args.clients} client(s), {os.cpu_count()} cores (cpu, wall):")
    for name, values in figures.items():
        cpus, walls = [c for c, _ in values], [w for _, w in values]
        print(
            f"  {name}: cpu median {statistics.median(cpus):.3f}, wall median "
            f"{statistics.median(walls):.3f}; rounds {[round(c, 2) for c in cpus]}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--ops", default="read,post")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--sort", default="cumulative", help="pstats order (tottime...)")
    parser.add_argument(
        "--rounds", type=int, default=0, help="no profile: CPU per request, this many rounds"
    )
    parser.add_argument(
        "--compare-reads", type=int, default=0, help="rounds: one statement against two"
    )
    parser.add_argument("--clients", type=int, default=1, help="with --compare-reads")
    parser.add_argument("--db", default="poppy_bench_profile")
    parser.add_argument("--out", default=str(ROOT / "var" / "bench"))
    args = parser.parse_args()
    args.server, args.workers = "uvicorn", 1
    tmp = Path(tempfile.mkdtemp(prefix="poppy-bench-profile-"))
    cluster = latency.launcher(tmp, free_port(), args)
    cluster.env["POPPY_BASE_URL"] = public = f"http://127.0.0.1:{PUBLIC_PORT}"
    try:
        create_without_discovery_checks(cluster)
        os.environ.update(cluster.env)  # the throttle rates of production mode too
        latency.setup_django(cluster.env, "poppy_django.verifier.dpop.verify")
        agent = latency.dpop_agent("profile")
        latency.seed([agent], [10, 11])
        if args.compare_reads:
            compare_reads(args, agent, public)
            return
        if args.rounds:
            cost = {op: [] for op in args.ops.split(",")}
            for op in cost:
                asyncio.run(drive(op, 20, agent, public))  # warm
            for _ in range(args.rounds):
                for op, values in cost.items():
                    cpu = time.process_time()
                    asyncio.run(drive(op, args.requests, agent, public))
                    values.append((time.process_time() - cpu) * 1000 / args.requests)
            print(json.dumps({op: sorted(values) for op, values in cost.items()}))
            return
        for op in args.ops.split(","):
            asyncio.run(drive(op, 20, agent, public))  # warm: imports, connections, caches
            cpu = time.process_time()
            with AllThreads() as profiler:
                asyncio.run(drive(op, args.requests, agent, public))
            per_request = (time.process_time() - cpu) * 1000 / args.requests
            stats = profiler.stats()
            Path(args.out).mkdir(parents=True, exist_ok=True)
            stats.dump_stats(str(Path(args.out) / f"profile-{op}.pstats"))
            print(f"\n==== {op}: {per_request:.2f} ms CPU per request (profiled) ====")
            stats.stream = sys.stdout  # type: ignore[attr-defined]
            stats.sort_stats(args.sort).print_stats(args.top)
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
