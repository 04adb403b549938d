"""Turns in flight: N conversations at once, each turn waiting on an LLM-shaped model.

    flock /tmp/poppy-bench.lock .venv/bin/python bench/inflight.py --n 1,10 \
        [--ttft 5] [--stream-seconds 5] [--rate 10] \
        [--pool prefork] [--concurrency 2] [--workers 1] [--pgbouncer]

Production mode on loopback, started by the launcher the multiprocess tests use
(``tests/multiprocess/cluster.py``): a private PostgreSQL database (``--db``, dropped at the
end), a private redis-server, ONE uvicorn process (``example_project.asgi``, DEBUG off, DPoP
with the development authority's tokens), ``--workers`` Celery worker processes
(``--pool``, ``--concurrency``), and the LLM-shaped local model (``bench/llm_endpoint.py``:
``--ttft`` seconds to the first token, then ``--rate`` tokens/s for ``--stream-seconds``),
reached through pydantic-ai's OpenAI chat model (``POPPY_MODEL=openai-chat:local``) as a real
provider would be (``--model scripted``: the example's scripted model instead, turns that
never wait, for turns/s at saturation). ``--pgbouncer`` puts a private PgBouncer
(transaction pooling, ``--pool-size`` server connections) between every process and
PostgreSQL.

For each N: N personal agents (own ES256 keys, real Session Tokens) each start a
conversation at once (raw HTTP/1.1, a fresh DPoP proof per request), then follow it on SSE
until its reply is complete. Printed per N: every reply answered / failed, the wall time
from the first POST to the last reply, turns/s, the most model calls in flight at once (the
endpoint's count of open streams), the workers' RSS (peak, and its growth per turn in
flight), the PostgreSQL connections held (most at once, ``pg_stat_activity``), CPU ms per
turn of the web process, the workers, the database's backends, Redis and the model endpoint
(from /proc), and the first text delta's latency from the POST, p50/p99 over the SSE readers
(it includes ``--ttft``). Results: stdout and ``var/bench/inflight.json``; published by hand
in docs/benchmarks.md ("Turns in flight").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.latency import (  # noqa: E402
    Agent,
    create_without_discovery_checks,
    dpop_agent,
    machine,
    pct,
    setup_django,
)
from tests import pgbouncer  # noqa: E402
from tests.multiprocess.cluster import BENCH_ENV, PG_ADMIN, Cluster, cpu_seconds, free_port  # noqa: E402

PATH = "/poppy/conversations"
RUN = secrets.token_hex(3)


# -- processes: RSS and CPU from /proc ------------------------------------------------------


def tree(pid: int) -> set[int]:
    """A process and its live descendants (a prefork worker's children)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                parents[int(entry.name)] = int(
                    (entry / "stat").read_text().rpartition(")")[2].split()[1]
                )
    members, grew = {pid}, True
    while grew:
        more = {child for child, parent in parents.items() if parent in members} - members
        members |= more
        grew = bool(more)
    return members


def rss_mib(pids: list[int]) -> float:
    total = 0
    for root in pids:
        for member in tree(root):
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{member}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
    return total / 1024


def own_cpu(pid: int) -> float:
    """utime + stime of one process (a PostgreSQL backend), 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def backends(database: str) -> list[int]:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (database,)
        ).fetchall()
    return [int(row[0]) for row in rows]


@dataclass
class Stack:
    """The running processes and how to read them."""

    cluster: Cluster
    port: int
    llm: str
    workers: list[str]
    bouncer: pgbouncer.PgBouncer | None = None

    @property
    def public(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def worker_pids(self) -> list[int]:
        return [self.cluster.pid(name) for name in self.workers]

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far: web, workers, Redis, the model, PgBouncer, this client."""
        assert self.cluster.redis is not None
        return {
            "web": cpu_seconds(self.cluster.pid("web")),
            "worker": sum(cpu_seconds(pid) for pid in self.worker_pids()),
            "redis": cpu_seconds(self.cluster.redis.pid),
            "llm": cpu_seconds(self.cluster.pid("llm")),
            "client": time.process_time(),
            **({"pgbouncer": cpu_seconds(self.bouncer.pid)} if self.bouncer else {}),
        }

    def postgres_cpu(self) -> dict[int, float]:
        """CPU seconds so far of each backend serving the database."""
        return {pid: own_cpu(pid) for pid in backends(self.cluster.name)}

    def llm_stats(self, reset: bool = False) -> dict[str, Any]:
        if reset:
            return httpx.post(f"{self.llm}/stats/reset", timeout=10).json()
        return httpx.get(f"{self.llm}/stats", timeout=10).json()


class Sampler(threading.Thread):
    """Every ``interval``: the model calls in flight, the workers' RSS, PostgreSQL
    connections of the database; the peaks are what the report shows."""

    def __init__(self, stack: Stack, interval: float = 0.25) -> None:
        super().__init__(daemon=True, name="inflight-sampler")
        self.stack = stack
        self.interval = interval
        self.stopped = threading.Event()
        self.rss_peak = 0.0
        self.pg_peak = 0
        self.open_peak = 0
        self.ready = threading.Event()  # set once the first sample is taken

    def run(self) -> None:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn, httpx.Client(timeout=5) as http:
            self.sample(conn, http)
            self.ready.set()
            while not self.stopped.wait(self.interval):
                self.sample(conn, http)
            self.sample(conn, http)  # the moment the last reply came in

    def sample(self, conn: psycopg.Connection[Any], http: httpx.Client) -> None:
        with contextlib.suppress(httpx.HTTPError):
            open_now = http.get(f"{self.stack.llm}/stats").json()["open"]
            self.open_peak = max(self.open_peak, open_now)
        self.rss_peak = max(self.rss_peak, rss_mib(self.stack.worker_pids()))
        (held,) = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s",
            (self.stack.cluster.name,),
        ).fetchone()  # type: ignore[misc]
        self.pg_peak = max(self.pg_peak, int(held))

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=10)


# -- one personal agent: POST, then follow the conversation on SSE --------------------------


@dataclass
class Outcome:
    posted: float = 0.0
    accepted: float | None = None  # the 201 read
    first_delta: float | None = None
    complete: float | None = None
    text: str = ""
    error: str = ""


@dataclass
class Frame:
    event: str
    data: str
    id: str = ""


@dataclass
class Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    buffer: bytes = b""
    pending: list[bytes] = field(default_factory=list)


def headers_for(stack: Stack, agent: Agent, method: str, path: str) -> list[str]:
    assert agent.signer is not None
    return [
        f"Authorization: {agent.authorization}",
        f"DPoP: {agent.signer.proof(method, stack.public + path)}",
    ]


async def send(
    conn: Connection, port: int, method: str, target: str, headers: list[str], body: bytes = b""
) -> tuple[int, dict[str, str]]:
    lines = [f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{port}", *headers]
    if method == "POST":
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    conn.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    head = await conn.reader.readuntil(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    found = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        if name:
            found[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), found


async def body_chunks(conn: Connection, headers: dict[str, str]) -> AsyncIterator[bytes]:
    """A response body as it arrives (chunked or with a length)."""
    if "content-length" in headers:
        yield await conn.reader.readexactly(int(headers["content-length"]))
        return
    while True:
        size = int((await conn.reader.readuntil(b"\r\n")).split(b";")[0], 16)
        chunk = await conn.reader.readexactly(size + 2)
        if size == 0:
            return
        yield chunk[:-2]


async def whole_body(conn: Connection, headers: dict[str, str]) -> bytes:
    return b"".join([chunk async for chunk in body_chunks(conn, headers)])


async def sse(conn: Connection, headers: dict[str, str]) -> AsyncIterator[Frame]:
    buffer = b""
    async for chunk in body_chunks(conn, headers):
        buffer += chunk
        while b"\n\n" in buffer:
            raw, buffer = buffer.split(b"\n\n", 1)
            frame = Frame("message", "")
            data: list[str] = []
            for line in raw.decode().split("\n"):
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "event":
                    frame.event = value
                elif name == "data":
                    data.append(value)
                elif name == "id":
                    frame.id = value
            if data:
                frame.data = "\n".join(data)
                yield frame


async def converse(
    stack: Stack, agent: Agent, text: str, outcome: Outcome, deadline: float
) -> None:
    """Start a conversation with ``text``; follow it until the company's reply is complete."""
    reader, writer = await asyncio.open_connection("127.0.0.1", stack.port)
    conn = Connection(reader, writer)
    try:
        message = {"id": f"in-{RUN}-{secrets.token_hex(6)}", "sender": "agent", "text": text}
        outcome.posted = time.perf_counter()
        status, headers = await send(
            conn,
            stack.port,
            "POST",
            PATH,
            headers_for(stack, agent, "POST", PATH),
            json.dumps({"message": message}).encode(),
        )
        body = await whole_body(conn, headers)
        outcome.accepted = time.perf_counter()
        if status != 201:
            outcome.error = f"POST {status}: {body[:200]!r}"
            return
        events = f"{PATH}/{json.loads(body)['conversation_id']}/events"
        last_id = ""
        while time.monotonic() < deadline and outcome.complete is None:
            extra = [f"Last-Event-ID: {last_id}"] if last_id else []
            status, headers = await send(
                conn,
                stack.port,
                "GET",
                events,
                [*headers_for(stack, agent, "GET", events), "Accept: text/event-stream", *extra],
            )
            if status != 200:
                outcome.error = f"SSE {status}: {(await whole_body(conn, headers))[:200]!r}"
                return
            remaining = max(1.0, deadline - time.monotonic())
            with contextlib.suppress(TimeoutError, asyncio.IncompleteReadError):
                await asyncio.wait_for(follow(conn, headers, outcome), remaining)
            if outcome.complete is None:  # the stream ended first: resume on a new connection
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", stack.port)
                conn = Connection(reader, writer)
        if outcome.complete is None and not outcome.error:
            outcome.error = "no reply before the deadline"
    except (OSError, asyncio.IncompleteReadError, ValueError) as error:
        outcome.error = f"{type(error).__name__}: {error}"
    finally:
        writer.close()


async def follow(conn: Connection, headers: dict[str, str], outcome: Outcome) -> None:
    async for frame in sse(conn, headers):
        if frame.event == "text-delta" and outcome.first_delta is None:
            outcome.first_delta = time.perf_counter()
        elif frame.event == "message":
            event = json.loads(frame.data)
            if event.get("type") == "message" and event["message"].get("role") == "company":
                outcome.complete = time.perf_counter()
                outcome.text = event["message"].get("text", "")
                return


# -- one row of the curve --------------------------------------------------------------------


def run_batch(stack: Stack, agents: list[Agent], text: str, timeout: float) -> list[Outcome]:
    outcomes = [Outcome() for _ in agents]
    deadline = time.monotonic() + timeout

    async def all_at_once() -> None:
        await asyncio.gather(
            *(
                converse(stack, agent, text, outcome, deadline)
                for agent, outcome in zip(agents, outcomes, strict=True)
            )
        )

    asyncio.run(all_at_once())
    return outcomes


def measure(stack: Stack, agents: list[Agent], args: argparse.Namespace) -> dict[str, Any]:
    from poppy_django.conf import DEFAULT_TEXTS

    n = len(agents)
    stack.llm_stats(reset=True)
    rss_before = rss_mib(stack.worker_pids())
    cpu_before = stack.cpu()
    pg_before = stack.postgres_cpu()
    sampler = Sampler(stack)
    sampler.start()
    sampler.ready.wait(10)
    started = time.perf_counter()
    outcomes = run_batch(stack, agents, "hello, a question for you", args.timeout)
    sampler.stop()
    cpu_after = stack.cpu()
    # The backends alive now: their CPU now minus then (new ones from zero; one that ended
    # during the run is not counted).
    cpu_before["postgres"] = 0.0
    cpu_after["postgres"] = sum(
        used - pg_before.get(pid, 0.0) for pid, used in stack.postgres_cpu().items()
    )
    served = stack.llm_stats()
    answered = [o for o in outcomes if o.complete is not None]
    failed = [o for o in answered if o.text == DEFAULT_TEXTS["failed_turn"]]
    wall = max((o.complete for o in answered), default=time.perf_counter()) - started  # type: ignore[type-var]
    first = [o.first_delta - o.posted for o in outcomes if o.first_delta is not None]
    accepted = [o.accepted for o in outcomes if o.accepted is not None]
    in_flight = max(served["max_open"], sampler.open_peak)
    cpu_ms = {name: round(1000 * (cpu_after[name] - cpu_before[name]) / n, 2) for name in cpu_after}
    errors: dict[str, int] = {}
    for outcome in outcomes:
        if outcome.error:
            key = outcome.error.split(":")[0]
            errors[key] = errors.get(key, 0) + 1
    return {
        "n": n,
        "answered": len(answered),
        "failed": len(failed),
        "errors": errors,
        "wall_s": round(wall, 2),
        "turns_per_s": round(len(answered) / wall, 2) if wall > 0 else None,
        "max_in_flight": in_flight,
        "model_requests": served["requests"],
        "worker_rss_mib": round(max(sampler.rss_peak, rss_before), 1),
        "worker_rss_per_in_flight_mib": (
            round((sampler.rss_peak - rss_before) / in_flight, 3) if in_flight else None
        ),
        "pg_connections_max": sampler.pg_peak,
        "cpu_ms_per_turn": cpu_ms,
        # When the web process had answered every POST: what is left is the workers' time.
        "last_post_answered_s": round(max(accepted) - started, 2) if accepted else None,
        "first_delta_p50_s": round(pct(first, 0.50), 3) if first else None,
        "first_delta_p99_s": round(pct(first, 0.99), 3) if first else None,
    }


# -- the stack --------------------------------------------------------------------------------


@contextlib.contextmanager
def started(args: argparse.Namespace, tmp: Path) -> Iterator[Stack]:
    port = free_port()
    env = {
        **BENCH_ENV,
        "POPPY_BASE_URL": f"http://127.0.0.1:{port}",
        "POPPY_DEV_AUTHORITY": "1",  # mints the bench's tokens: the explicit opt-in
        "POPPY_AUTHENTICATE": "poppy_django.verifier.dpop.verify",
        "POPPY_TURN_TIMEOUT_SECONDS": str(args.turn_timeout),
        # The engine's bounds, the example project's knobs: its default would cap a worker
        # process at 200 turns in flight.
        "POPPY_TURNS_IN_FLIGHT": str(args.turns_in_flight),
        "POPPY_EXECUTOR_THREADS": str(args.executor_threads),
    }
    with contextlib.ExitStack() as stack:
        bouncer = None
        if args.pgbouncer:
            bouncer = stack.enter_context(pgbouncer.running(pool_size=args.pool_size))
            env["DATABASE_TRANSACTION_POOLING"] = "1"
        cluster = Cluster(tmp, name=args.db, env=env, log_level="warning")
        if bouncer is not None:
            cluster.env["DATABASE_URL"] = bouncer.url(cluster.name)
        stack.callback(cluster.destroy)
        create_without_discovery_checks(cluster)
        tokens = max(1, round(args.rate * args.stream_seconds))
        llm = cluster.llm(ttft=args.ttft, tokens=tokens, rate=args.rate)
        if args.model == "scripted":  # the example's own offline model: turns that never wait
            cluster.env.pop("POPPY_MODEL")
        cluster.web("web", port=port)
        options = [f"--pool={args.pool}", f"--concurrency={args.concurrency}"]
        workers = [f"worker{index}" for index in range(args.workers)]
        for name in workers:
            cluster.worker(name, options=options)
        yield Stack(cluster, port, llm, workers, bouncer)


def warm_up(stack: Stack, agents: list[Agent], args: argparse.Namespace) -> None:
    """Every worker process up with its imports done: quick turns, as many as run at once."""
    outcomes = run_batch(stack, agents, "warm up #ttft=0 #tokens=2", 180)
    missing = [o.error for o in outcomes if o.complete is None]
    if missing:
        raise RuntimeError(f"the warm-up turns were not answered: {missing[:3]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="1,10", help="comma-separated: conversations at once")
    parser.add_argument("--ttft", type=float, default=5.0, help="model: seconds to first token")
    parser.add_argument("--stream-seconds", type=float, default=5.0, help="model: streaming")
    parser.add_argument("--rate", type=float, default=10.0, help="model: tokens per second")
    parser.add_argument(
        "--model",
        choices=["llm", "scripted"],
        default="llm",
        help="llm: the LLM-shaped local model; scripted: the example's scripted model",
    )
    parser.add_argument("--pool", default="prefork", help="celery worker --pool")
    parser.add_argument("--concurrency", type=int, default=2, help="celery worker -c")
    parser.add_argument("--workers", type=int, default=1, help="Celery worker processes")
    parser.add_argument(
        "--turns-in-flight", type=int, default=1000, help='POPPY["TURNS_IN_FLIGHT"]'
    )
    parser.add_argument("--executor-threads", type=int, default=8, help='POPPY["EXECUTOR_THREADS"]')
    parser.add_argument("--pgbouncer", action="store_true", help="through a private PgBouncer")
    parser.add_argument("--pool-size", type=int, default=20, help="PgBouncer's pool size")
    parser.add_argument("--timeout", type=float, default=900, help="per N: give up after")
    parser.add_argument("--turn-timeout", type=float, default=120, help="TURN_TIMEOUT_SECONDS")
    parser.add_argument("--db", default="poppy_bench_inflight")
    args = parser.parse_args()
    sizes = [int(part) for part in args.n.split(",") if part]

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the servers inherit it
    if hard < 3 * max(sizes) + 200:
        sys.exit(f"RLIMIT_NOFILE hard limit {hard} is too low for N = {max(sizes)}")

    tmp = Path(tempfile.mkdtemp(prefix="poppy-inflight-"))
    results: dict[str, Any] = {"args": vars(args), "rows": []}
    with started(args, tmp) as stack:
        setup_django(stack.cluster.env, "poppy_django.verifier.dpop.verify")
        results["machine"] = machine()
        agents = [dpop_agent(f"inflight-{RUN}-{index}") for index in range(max(sizes))]
        warm_up(stack, agents[: max(1, args.workers * args.concurrency)], args)
        print(_header(args), flush=True)
        for n in sizes:
            row = measure(stack, agents[:n], args)
            results["rows"].append(row)
            print(_line(row), flush=True)
    out = ROOT / "var" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "inflight.json").write_text(json.dumps(results, indent=2))
    print(f"written: {out / 'inflight.json'}")
    shutil.rmtree(tmp, ignore_errors=True)  # the processes' logs: kept only when it failed


def _header(args: argparse.Namespace) -> str:
    shape = (
        f"{args.workers} worker(s) --pool={args.pool} -c {args.concurrency}"
        f", TURNS_IN_FLIGHT={args.turns_in_flight}, EXECUTOR_THREADS={args.executor_threads}"
    )
    model = f"ttft {args.ttft} s + {args.stream_seconds} s at {args.rate} tokens/s"
    if args.model == "scripted":
        model = "scripted (no waiting)"
    columns = (
        "     N  answered failed   wall s  turns/s  in flight  RSS MiB  MiB/in-flight  pg conns"
        "  cpu ms/turn web/worker/pg/redis/llm   first delta p50/p99 s"
    )
    return f"{shape}; model {model}{'; PgBouncer' if args.pgbouncer else ''}\n{columns}"


def _line(row: dict[str, Any]) -> str:
    cpu = row["cpu_ms_per_turn"]
    per_flight = row["worker_rss_per_in_flight_mib"]
    errors = f"  errors {row['errors']}" if row["errors"] else ""
    return (
        f"{row['n']:6d}  {row['answered']:8d} {row['failed']:6d}  {row['wall_s']:7.2f}"
        f"  {row['turns_per_s'] or 0:7.2f}  {row['max_in_flight']:9d}  {row['worker_rss_mib']:7.1f}"
        f"  {per_flight if per_flight is not None else '-':>13}  {row['pg_connections_max']:8d}"
        f"  {cpu['web']:.1f}/{cpu['worker']:.1f}/{cpu['postgres']:.1f}/{cpu['redis']:.1f}"
        f"/{cpu['llm']:.1f}"
        f"   {row['first_delta_p50_s']}/{row['first_delta_p99_s']}"
        f"  {row['last_post_answered_s']}{errors}"
    )


if __name__ == "__main__":
    main()
