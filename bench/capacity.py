"""Capacity of one ASGI process: idle SSE streams, waiting long-polls, memory over many messages.

    flock /tmp/poppy-bench.lock .venv/bin/python bench/capacity.py \
        [--streams 5000] [--polls 2000] [--messages 100000] [--only streams,polls,memory]

Production mode on loopback: a private PostgreSQL database (``poppy_bench_cap``) and a private
redis-server, ONE uvicorn process (``example_project.asgi``, DEBUG off, fake verifier) and two
Celery workers, started by the launcher the multiprocess tests use
(``tests/multiprocess/cluster.py``); all of them are stopped and the database dropped at the
end. The client is one asyncio process speaking HTTP/1.1 over raw streams (no thread per
connection).

1. Streams: ``--streams`` SSE streams on distinct conversations, each counted open once it
   received ``: stream opened``; then a sample is posted to and must see its message on its
   stream. Server RSS before/while/after, memory per stream, threads, DB connections, CPU.
2. Long-polls: ``POST /messages`` latency (context-only messages, one client) idle, then with
   ``--polls`` long-polls (``?wait=30&cursor=<last>``, re-issued as they end) held open, and
   the ratio of the p99s; then a sample of the polled conversations is posted to, and each
   poll must answer with the new event.
3. Memory: ``--messages`` messages (context-only, plus one text message in ``--text-every``,
   which runs a turn on the workers), uvicorn RSS sampled every ``--sample-every``.

Prints a table; writes everything to var/bench/capacity.json. Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import resource
import secrets
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from poppy_django.verifier.fake import fake_authorization  # noqa: E402
from tests.multiprocess.cluster import BENCH_ENV, Cluster, cpu_seconds  # noqa: E402

HOST = "127.0.0.1"
PATH = "/poppy/conversations"


# --- the machine and the processes ------------------------------------------------------------


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS (KiB) and Threads of a process, from /proc/<pid>/status."""
    values: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "Threads"):
            values[key] = int(value.split()[0])
    return values


def machine(pg_version: str) -> dict[str, Any]:
    import django
    import uvicorn

    model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    redis_version = subprocess.run(
        ["redis-server", "--version"], capture_output=True, text=True
    ).stdout.split()[2]
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "django": django.__version__,
        "uvicorn": uvicorn.__version__,
        "postgresql": pg_version,
        "redis": redis_version.removeprefix("v="),
        "kernel": platform.release(),
    }


class Servers:
    """This bench's processes on the shared launcher: one uvicorn process, Celery workers."""

    def __init__(
        self,
        var: Path,
        workers: int,
        db_name: str,
        synchronous_commit: str,
        wake_fallback: float | None = None,
        waiting: int = 0,
    ) -> None:
        self.synchronous_commit = synchronous_commit
        self.workers = workers
        # One caller holds every waiting read: its bound per caller raised to them all.
        env = {
            **BENCH_ENV,
            "POPPY_DEV_AUTHORITY": "0",
            "DJANGO_SETTINGS_MODULE": "bench.capacity_settings",
            "POPPY_BENCH_MAX_WAITING_PER_CALLER": str(max(waiting, 100)),
        }
        if wake_fallback is not None:
            env["POPPY_BENCH_WAKE_FALLBACK_SECONDS"] = str(wake_fallback)
        self.cluster = Cluster(var, name=db_name, env=env, log_level="warning")
        self.port = 0
        self.pid = 0

    def start(self) -> None:
        self.cluster.create()
        name = self.cluster.name
        self.cluster.pg(
            f'ALTER DATABASE "{name}" SET synchronous_commit = {self.synchronous_commit}'
        )
        self.port = int(self.cluster.web("uvicorn").rpartition(":")[2])
        self.pid = self.cluster.pid("uvicorn")
        for index in range(self.workers):
            self.cluster.worker(f"celery{index}")

    def server(self) -> dict[str, Any]:
        """The uvicorn process now: RSS (MiB), threads, DB connections of the database."""
        status = proc_status(self.pid)
        rows = self.cluster.pg(
            f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{self.cluster.name}'"
        )
        return {
            "rss_mib": round(status["VmRSS"] / 1024, 1),
            "threads": status["Threads"],
            "db_connections": int(rows[0][0]),
        }


# --- a light HTTP/1.1 client over asyncio streams --------------------------------------------


class Http:
    """One keep-alive connection; requests one after another."""

    def __init__(self, port: int, authorization: str) -> None:
        self.port = port
        self.authorization = authorization
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(HOST, self.port)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def send(self, method: str, target: str, body: bytes = b"", accept: str = "") -> None:
        assert self.writer is not None
        head = (
            f"{method} {target} HTTP/1.1\r\nHost: {HOST}:{self.port}\r\n"
            f"Authorization: {self.authorization}\r\n"
        )
        if accept:
            head += f"Accept: {accept}\r\n"
        if method == "POST":
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self.writer.write(head.encode() + b"\r\n" + body)

    async def head(self) -> tuple[int, dict[str, str]]:
        assert self.reader is not None
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        return int(lines[0].split()[1]), headers

    async def response(self) -> tuple[int, bytes]:
        assert self.reader is not None
        status, headers = await self.head()
        if "content-length" in headers:
            return status, await self.reader.readexactly(int(headers["content-length"]))
        body = b""
        while True:  # chunked
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunk = await self.reader.readexactly(size + 2)
            if size == 0:
                return status, body
            body += chunk[:-2]

    async def request(
        self, method: str, target: str, body: dict[str, Any] | None = None
    ) -> tuple[int, Any]:
        if self.writer is None:
            await self.connect()
        self.send(method, target, json.dumps(body).encode() if body is not None else b"")
        try:
            status, raw = await self.response()
        except BaseException:
            self.close()
            raise
        return status, json.loads(raw) if raw else None


_ids = itertools.count(1)
RUN = secrets.token_hex(3)


def message(context: dict[str, Any] | None = None, text: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"id": f"cap-{RUN}-{next(_ids)}", "sender": "agent"}
    if context is not None:
        body["context"] = context
    if text is not None:
        body["text"] = text
    return {"message": body}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def bounded(
    count: int, concurrency: int, job: Callable[[int], Awaitable[None]], deadline: float
) -> None:
    """Run job(0..count-1) with at most ``concurrency`` at once, giving up at ``deadline``."""
    indexes = iter(range(count))

    async def runner() -> None:
        for index in indexes:
            if time.monotonic() > deadline:
                return  # out of time: the caller reports what was done
            await job(index)

    await asyncio.gather(*(runner() for _ in range(concurrency)))


class Client:
    def __init__(self, servers: Servers, authorization: str) -> None:
        self.servers = servers
        self.port = servers.port
        self.authorization = authorization

    def http(self) -> Http:
        return Http(self.port, self.authorization)

    async def create(self, count: int, concurrency: int = 16) -> list[tuple[str, str]]:
        """``count`` conversations started by a context-only message: (id, cursor)."""
        made: list[tuple[str, str]] = []
        connections = [self.http() for _ in range(concurrency)]
        free = list(connections)

        async def one(index: int) -> None:
            http = free.pop()
            try:
                status, body = await http.request(
                    "POST", f"{PATH}?wait=0", message(context={"bench": index})
                )
            finally:
                free.append(http)
            assert status == 201, (status, body)
            made.append((body["conversation_id"], body["cursor"]))

        await bounded(count, concurrency, one, time.monotonic() + 600)
        for http in connections:
            http.close()
        return made

    async def post_latencies(
        self, conversations: list[str], count: int, warmup: int = 30, seconds: float = 120
    ) -> list:
        """Sequential context-only POST /messages on one connection: latencies in ms
        (fewer than ``count`` if ``seconds`` run out)."""
        http = self.http()
        latencies = []
        deadline = time.monotonic() + seconds
        for index in range(warmup + count):
            if time.monotonic() > deadline:
                break
            conversation = conversations[index % len(conversations)]
            started = time.perf_counter()
            status, body = await http.request(
                "POST", f"{PATH}/{conversation}/messages", message(context={"n": index})
            )
            elapsed = (time.perf_counter() - started) * 1000
            assert status == 202, (status, body)
            if index >= warmup:
                latencies.append(elapsed)
        http.close()
        return latencies


# --- 1. idle SSE streams ---------------------------------------------------------------------


class Stream:
    OPENED = b": stream opened"

    def __init__(self, client: Client, conversation: str) -> None:
        self.client = client
        self.conversation = conversation
        self.http = client.http()
        self.open = False
        self.ended = False
        self.error: str | None = None
        self.watch: bytes | None = None
        self.watch_since = 0.0
        self.seen_after: float | None = None
        self.opened = asyncio.Event()

    async def run(self) -> None:
        tail = b""
        try:
            await self.http.connect()
            self.http.send("GET", f"{PATH}/{self.conversation}/events", accept="text/event-stream")
            status, _ = await self.http.head()
            if status != 200:
                raise RuntimeError(f"status {status}")
            assert self.http.reader is not None
            while True:
                data = await self.http.reader.read(65536)
                if not data:
                    self.ended = True
                    return
                tail = (tail + data)[-4096:]
                if not self.open and self.OPENED in tail:
                    self.open = True
                    self.opened.set()
                if self.watch is not None and self.watch in tail:
                    self.seen_after = time.monotonic() - self.watch_since
                    self.watch = None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.error = repr(exc)
        finally:
            self.opened.set()
            self.http.close()


async def measure_streams(
    client: Client, args: argparse.Namespace, conversations: list[tuple[str, str]]
) -> dict[str, Any]:
    servers = client.servers
    await asyncio.sleep(2)
    before = servers.server()
    streams = [Stream(client, conversation) for conversation, _ in conversations]
    tasks: list[asyncio.Task[None]] = []
    started = time.monotonic()

    async def open_one(index: int) -> None:
        stream = streams[index]
        tasks.append(asyncio.create_task(stream.run()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stream.opened.wait(), 60)

    await bounded(len(streams), args.open_concurrency, open_one, started + args.phase_seconds)
    open_seconds = time.monotonic() - started
    opened = sum(stream.open for stream in streams)
    print(f"  {opened}/{len(streams)} streams opened in {open_seconds:.1f}s", flush=True)

    # Hold them: every stream passes its fallback re-read and a keep-alive meanwhile.
    cpu_before = cpu_seconds(servers.pid)
    await asyncio.sleep(args.hold_seconds)
    idle_cpu = (cpu_seconds(servers.pid) - cpu_before) / args.hold_seconds
    held = servers.server()

    # Still delivering: post a message to a sample of the conversations.
    step = max(1, len(streams) // args.sample)
    sample = [s for s in streams[::step] if s.open and not s.ended][: args.sample]
    poster = client.http()
    for stream in sample:
        body = message(context={"probe": True})
        stream.watch = f'"id":"{body["message"]["id"]}"'.encode()
        stream.watch_since = time.monotonic()
        status, answer = await poster.request(
            "POST", f"{PATH}/{stream.conversation}/messages", body
        )
        assert status == 202, (status, answer)
    poster.close()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(s.seen_after is None for s in sample):
        await asyncio.sleep(0.1)
    delivered = [s.seen_after for s in sample if s.seen_after is not None]
    still_open = sum(s.open and not s.ended and s.error is None for s in streams)
    errors = sorted({s.error for s in streams if s.error})[:5]

    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(5)
    after = servers.server()
    return {
        "requested": len(streams),
        "opened": opened,
        "open_seconds": round(open_seconds, 1),
        "held_seconds": args.hold_seconds,
        "still_open_after_hold": still_open,
        "ended_early": sum(s.ended for s in streams),
        "errors": errors,
        "probe_sample": len(sample),
        "probe_delivered": len(delivered),
        "probe_delivery_ms_p50": round(pct(delivered, 0.5) * 1000, 1),
        "probe_delivery_ms_p99": round(pct(delivered, 0.99) * 1000, 1),
        "server_before": before,
        "server_holding": held,
        "server_after_close": after,
        "server_cpu_while_idle": round(idle_cpu, 3),
        "kib_per_stream": round((held["rss_mib"] - before["rss_mib"]) * 1024 / max(opened, 1), 1),
    }


# --- 2. long-polls ---------------------------------------------------------------------------


class Poller:
    def __init__(self, client: Client, conversation: str, cursor: str) -> None:
        self.http = client.http()
        self.conversation = conversation
        self.cursor = cursor
        self.waiting = False
        self.answers = 0
        self.with_events = 0
        self.error: str | None = None
        self.watch: str | None = None
        self.watch_since = 0.0
        self.seen_after: float | None = None

    async def run(self, stop: asyncio.Event) -> None:
        try:
            await self.http.connect()
            while not stop.is_set():
                self.http.send(
                    "GET", f"{PATH}/{self.conversation}/events?wait=30&cursor={self.cursor}"
                )
                self.waiting = True
                status, raw = await self.http.response()
                self.waiting = False
                page = json.loads(raw)
                if status != 200:
                    raise RuntimeError(f"status {status}: {page}")
                self.answers += 1
                self.cursor = page["cursor"]
                if page["events"]:
                    self.with_events += 1
                    if self.watch and any(
                        e["type"] == "message" and e["message"]["id"] == self.watch
                        for e in page["events"]
                    ):
                        self.seen_after = time.monotonic() - self.watch_since
                        self.watch = None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.error = repr(exc)
        finally:
            self.waiting = False
            self.http.close()


async def measure_polls(
    client: Client,
    args: argparse.Namespace,
    conversations: list[tuple[str, str]],
    writers: list[str],
) -> dict[str, Any]:
    servers = client.servers
    await asyncio.sleep(2)
    idle_before = servers.server()
    idle = await client.post_latencies(writers, args.posts)
    print(
        f"  idle POST p50 {pct(idle, 0.5):.2f} ms, p99 {pct(idle, 0.99):.2f} ms",
        flush=True,
    )

    stop = asyncio.Event()
    pollers = [Poller(client, conversation, cursor) for conversation, cursor in conversations]
    tasks = []
    started = time.monotonic()
    for index, poller in enumerate(pollers):
        tasks.append(asyncio.create_task(poller.run(stop)))
        if index % args.open_concurrency == args.open_concurrency - 1:
            await asyncio.sleep(0.05)
    # Every poll has been read and is now waiting on the server (answers would come back).
    await asyncio.sleep(5)
    open_seconds = time.monotonic() - started
    waiting_before = sum(p.waiting for p in pollers)
    early = sum(p.answers for p in pollers)
    holding = servers.server()
    cpu_before = cpu_seconds(servers.pid)
    loaded_started = time.monotonic()
    loaded = await client.post_latencies(writers, args.posts)
    loaded_seconds = time.monotonic() - loaded_started
    cpu = (cpu_seconds(servers.pid) - cpu_before) / loaded_seconds
    waiting_after = sum(p.waiting for p in pollers)
    holding_after = servers.server()
    print(
        f"  {waiting_before} polls waiting: POST p50 {pct(loaded, 0.5):.2f} ms, "
        f"p99 {pct(loaded, 0.99):.2f} ms",
        flush=True,
    )

    # Still waking: post to a sample of the polled conversations.
    step = max(1, len(pollers) // args.sample)
    sample = [p for p in pollers[::step] if p.waiting][: args.sample]
    poster = client.http()
    for poller in sample:
        body = message(context={"probe": True})
        poller.watch = body["message"]["id"]
        poller.watch_since = time.monotonic()
        status, answer = await poster.request(
            "POST", f"{PATH}/{poller.conversation}/messages", body
        )
        assert status == 202, (status, answer)
    poster.close()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(p.seen_after is None for p in sample):
        await asyncio.sleep(0.1)
    woken = [p.seen_after for p in sample if p.seen_after is not None]
    stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    errors = sorted({p.error for p in pollers if p.error})[:5]
    return {
        "polls": len(pollers),
        "waiting_when_measured": waiting_before,
        "waiting_after_measure": waiting_after,
        "answered_before_measure": early,
        "open_seconds": round(open_seconds, 1),
        "errors": errors,
        "posts": args.posts,
        "posts_done_idle_loaded": [len(idle), len(loaded)],
        "idle_ms": {"p50": round(pct(idle, 0.5), 2), "p99": round(pct(idle, 0.99), 2)},
        "loaded_ms": {"p50": round(pct(loaded, 0.5), 2), "p99": round(pct(loaded, 0.99), 2)},
        "p99_ratio": round(pct(loaded, 0.99) / pct(idle, 0.99), 2),
        "p50_ratio": round(pct(loaded, 0.5) / pct(idle, 0.5), 2),
        "server_cpu_while_measuring": round(cpu, 3),
        "server_idle": idle_before,
        "server_holding": holding,
        "server_holding_after": holding_after,
        "probe_sample": len(sample),
        "probe_woken": len(woken),
        "probe_wake_ms_p50": round(pct(woken, 0.5) * 1000, 1),
        "probe_wake_ms_p99": round(pct(woken, 0.99) * 1000, 1),
    }


# --- 3. memory over many messages ------------------------------------------------------------


async def measure_memory(
    client: Client, args: argparse.Namespace, conversations: list[str]
) -> dict[str, Any]:
    servers = client.servers
    await asyncio.sleep(2)
    series = [{"messages": 0, "seconds": 0.0, **servers.server()}]
    print(f"  {series[-1]}", flush=True)
    counter = itertools.count()
    done = 0
    turns = 0
    started = time.monotonic()
    deadline = started + args.phase_seconds * 4
    next_sample = args.sample_every

    async def sender() -> None:
        nonlocal done, turns, next_sample
        http = client.http()
        try:
            while True:
                index = next(counter)
                if index >= args.messages or time.monotonic() > deadline:
                    return
                conversation = conversations[index % len(conversations)]
                if args.text_every and index % args.text_every == args.text_every - 1:
                    body = message(text=f"Hello, message {index}.")
                    turns += 1
                else:
                    body = message(context={"n": index})
                status, answer = await http.request("POST", f"{PATH}/{conversation}/messages", body)
                assert status == 202, (status, answer)
                done += 1
                if done >= next_sample:
                    next_sample += args.sample_every
                    elapsed = time.monotonic() - started
                    series.append(
                        {"messages": done, "seconds": round(elapsed, 1), **servers.server()}
                    )
                    print(f"  {series[-1]}", flush=True)
        finally:
            http.close()

    await asyncio.gather(*(sender() for _ in range(args.post_concurrency)))
    seconds = time.monotonic() - started
    warm = series[min(args.warmup_samples, len(series) - 1)]
    last = series[-1]
    return {
        "messages": done,
        "text_messages": turns,
        "seconds": round(seconds, 1),
        "messages_per_second": round(done / seconds, 1),
        "post_concurrency": args.post_concurrency,
        "conversations": len(conversations),
        "series": series,
        "warm_sample": warm["messages"],
        "rss_last_over_warm": round(last["rss_mib"] / warm["rss_mib"], 3),
        "rss_max_mib": max(s["rss_mib"] for s in series),
    }


# --- the run ---------------------------------------------------------------------------------


def table(result: dict[str, Any]) -> str:
    lines = []
    m = result["machine"]
    lines.append(
        f"machine: {m['nproc']} CPUs ({m['cpu']}), {m['memory_gib']} GiB, Python {m['python']}, "
        f"Django {m['django']}, uvicorn {m['uvicorn']}, PostgreSQL {m['postgresql']}, "
        f"Redis {m['redis']}"
    )
    rows: list[tuple[str, str, str]] = []
    s = result.get("streams")
    if s:
        rows += [
            ("SSE streams held open at once", f"{s['still_open_after_hold']}", ">= 5,000"),
            ("  opened / requested", f"{s['opened']} / {s['requested']}", ""),
            ("  time to open them all", f"{s['open_seconds']} s", ""),
            (
                "  probe messages delivered on their stream",
                f"{s['probe_delivered']} / {s['probe_sample']} "
                f"(p50 {s['probe_delivery_ms_p50']} ms, p99 {s['probe_delivery_ms_p99']} ms)",
                "all",
            ),
            (
                "  server RSS before / holding / after close",
                f"{s['server_before']['rss_mib']} / {s['server_holding']['rss_mib']} / "
                f"{s['server_after_close']['rss_mib']} MiB",
                "",
            ),
            ("  memory per stream", f"{s['kib_per_stream']} KiB", ""),
            (
                "  server threads before / holding",
                f"{s['server_before']['threads']} / {s['server_holding']['threads']}",
                "no thread per stream",
            ),
            (
                "  DB connections before / holding",
                f"{s['server_before']['db_connections']} / {s['server_holding']['db_connections']}",
                "no connection per stream",
            ),
            ("  server CPU while the streams idle", f"{s['server_cpu_while_idle']:.0%}", ""),
        ]
    p = result.get("polls")
    if p:
        rows += [
            ("Long-polls waiting at once", f"{p['waiting_when_measured']}", ">= 2,000"),
            (
                "  POST /messages p50 / p99, idle",
                f"{p['idle_ms']['p50']} / {p['idle_ms']['p99']} ms",
                "",
            ),
            (
                "  POST /messages p50 / p99, polls waiting",
                f"{p['loaded_ms']['p50']} / {p['loaded_ms']['p99']} ms",
                "",
            ),
            ("  p99 ratio (waiting / idle)", f"{p['p99_ratio']}", "<= 2"),
            (
                "  probe polls woken with their message",
                f"{p['probe_woken']} / {p['probe_sample']} "
                f"(p50 {p['probe_wake_ms_p50']} ms, p99 {p['probe_wake_ms_p99']} ms)",
                "all",
            ),
            (
                "  server RSS idle / polls waiting",
                f"{p['server_idle']['rss_mib']} / {p['server_holding']['rss_mib']} MiB",
                "",
            ),
            (
                "  server threads, DB connections (polls waiting)",
                f"{p['server_holding']['threads']}, {p['server_holding']['db_connections']}",
                "",
            ),
        ]
    mem = result.get("memory")
    if mem:
        series = ", ".join(f"{s['messages'] // 1000}k:{s['rss_mib']:.0f}" for s in mem["series"])
        rows += [
            (
                "Messages posted (text / context-only)",
                f"{mem['messages']} ({mem['text_messages']} text)",
                "100,000",
            ),
            ("  server RSS MiB by messages", series, ""),
            (
                f"  RSS last / at {mem['warm_sample'] // 1000}k (after warm-up)",
                f"{mem['rss_last_over_warm']}",
                "bounded",
            ),
            (
                "  threads at end",
                f"{mem['series'][-1]['threads']}",
                "",
            ),
        ]
    width = max(len(r[0]) for r in rows) if rows else 10
    value_width = min(60, max((len(r[1]) for r in rows), default=10))
    lines.append("")
    lines.append(f"{'figure':<{width}}  {'value':<{value_width}}  target")
    for name, value, target in rows:
        lines.append(f"{name:<{width}}  {value:<{value_width}}  {target}")
    return "\n".join(lines)


async def run(args: argparse.Namespace, servers: Servers) -> dict[str, Any]:
    authorization = fake_authorization("https://pa.example/bench", f"cap-{RUN}")
    client = Client(servers, authorization)
    only = set(args.only.split(","))
    result: dict[str, Any] = {}
    need = max(args.streams if "streams" in only else 0, args.polls if "polls" in only else 0)
    need = max(need, args.conversations if "memory" in only else 0)
    started = time.monotonic()
    conversations = await client.create(need + 20)
    writers = [c for c, _ in conversations[-20:]]
    readers = conversations[:-20]
    print(f"created {len(conversations)} conversations in {time.monotonic() - started:.1f}s")
    if "streams" in only:
        print(f"1. {args.streams} idle SSE streams", flush=True)
        result["streams"] = await measure_streams(client, args, readers[: args.streams])
        print(json.dumps(result["streams"]), flush=True)
    if "polls" in only:
        print(f"2. {args.polls} long-polls", flush=True)
        result["polls"] = await measure_polls(client, args, readers[: args.polls], writers)
        print(json.dumps(result["polls"]), flush=True)
    if "memory" in only:
        print(f"3. {args.messages} messages", flush=True)
        targets = [c for c, _ in readers[: args.conversations]]
        result["memory"] = await measure_memory(client, args, targets)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=5000, help="SSE streams to hold open")
    parser.add_argument("--polls", type=int, default=2000, help="long-polls to hold waiting")
    parser.add_argument("--messages", type=int, default=100_000, help="messages for memory")
    parser.add_argument("--posts", type=int, default=300, help="timed POSTs, idle and loaded")
    parser.add_argument("--sample", type=int, default=100, help="probed streams/polls")
    parser.add_argument("--hold-seconds", type=float, default=20.0)
    parser.add_argument("--sample-every", type=int, default=10_000)
    parser.add_argument("--warmup-samples", type=int, default=2, help="samples of warm-up")
    parser.add_argument("--text-every", type=int, default=200, help="one text message in N")
    parser.add_argument("--conversations", type=int, default=200, help="for the memory phase")
    parser.add_argument("--post-concurrency", type=int, default=8)
    parser.add_argument("--open-concurrency", type=int, default=100)
    parser.add_argument("--phase-seconds", type=float, default=180.0, help="time bound")
    parser.add_argument("--workers", type=int, default=2, help="Celery workers")
    parser.add_argument(
        "--synchronous-commit",
        choices=["on", "off"],
        default="on",
        help="PostgreSQL synchronous_commit of the bench database",
    )
    parser.add_argument(
        "--wake-fallback",
        type=float,
        default=None,
        help="POPPY WAKE_FALLBACK_SECONDS for the server (default: the app's default)",
    )
    parser.add_argument("--only", default="streams,polls,memory")
    parser.add_argument("--db", default="poppy_bench_cap")
    parser.add_argument("--out", default=str(ROOT / "var" / "bench" / "capacity.json"))
    args = parser.parse_args()

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # uvicorn inherits it
    needed = args.streams + args.polls + 1000
    if hard < needed:
        sys.exit(f"RLIMIT_NOFILE hard limit {hard} < {needed}: raise it (ulimit -Hn)")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    var = out.parent / "capacity-run"
    var.mkdir(parents=True, exist_ok=True)
    servers = Servers(
        var,
        args.workers,
        args.db,
        args.synchronous_commit,
        args.wake_fallback,
        args.streams + args.polls,
    )
    pg_version = servers.cluster.pg("SHOW server_version")[0][0]
    result: dict[str, Any] = {"machine": machine(pg_version)}
    result["wake_fallback_seconds"] = args.wake_fallback or "default (10)"
    print(table(result), flush=True)
    result["command"] = " ".join([Path(sys.executable).name, *sys.argv])
    result["settings"] = {k: v for k, v in vars(args).items() if k not in ("out", "db")} | {
        "rlimit_nofile": hard
    }
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())  # a lighter client
    try:
        servers.start()
        result.update(asyncio.run(asyncio.wait_for(run(args, servers), args.phase_seconds * 8)))
    except BaseException:
        with contextlib.suppress(OSError):
            print(servers.cluster.log("uvicorn"), file=sys.stderr)
        raise
    finally:
        servers.cluster.destroy()
    out.write_text(json.dumps(result, indent=2) + "\n")
    print()
    print(table(result))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
