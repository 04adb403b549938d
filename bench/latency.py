"""Latency and throughput of our ASGI server in production mode, and of the reference Company.

    flock /tmp/poppy-bench.lock .venv/bin/python bench/latency.py [--turns 200] [--duration 6] \
        [--server uvicorn|granian] [--workers 1]

Starts its own stack on the loopback address with the launcher the multiprocess tests use
(``tests/multiprocess/cluster.py``): a PostgreSQL database ``--db`` (dropped at
the end), a private ``redis-server``, the example project under ``--server`` with
``--workers`` web processes (``DATABASE_URL`` + ``REDIS_URL``: Celery turns, Redis fan-out
and cache, ``DJANGO_DEBUG=0``, scripted model; the URLconf of ``bench/ceiling.py``: the
project's URLs plus the ceiling route) and one Celery worker (solo pool). Then, in one run:

1. Turn latency: a message POST → the first ``text-delta`` on an already-open SSE stream,
   and → the complete reply seen by a long-poll reader (``wait=30``), p50/p99 over
   ``--turns`` sequential plain echo messages ("You said: …", word by word). Then the POST's
   own cost at message ~2 and at message ~``--growth`` of one new conversation (medians of
   10 POSTs each; every reply awaited, untimed, before the next POST).
2. POST message and JSON read (``GET …/events?cursor=<4 events before the end>``): req/s
   and p50/p99 at 1, 8 and 32 concurrent clients, each request with a fresh ES256 DPoP
   proof and a real Session Token from the development authority (what ``poppy_token``
   mints). The ceiling row (``ceil``): a bare Django async view returning a fixed JSON body
   on the same stack, driven the same way (proof signed and sent, not checked): the
   framework's floor. Then the same with a second server run under the fake verifier
   (``POPPY_AUTHENTICATE=poppy_django.verifier.fake.verify`` with the launcher's opt-in,
   ``POPPY_ALLOW_FAKE_VERIFIER=1``), and the verifier's own cost
   measured in this process on pre-made valid requests (fresh ``jti`` each, the
   production Redis replay cache). The client: asyncio, one raw HTTP/1.1 keep-alive
   connection per client, proofs signed with ``cryptography`` directly; its CPU time
   against wall time is reported for every cell, and the server's CPU (all its processes).
3. The same cells on conversations of 10, 1,000 and 10,000 events (seeded by ORM bulk
   inserts consistent with the model: whole turns, ``last_seq`` = N, the agent thread's
   entries), plus turn latency on a 10,000-event conversation. POSTs of the smallest size
   go to short conversations: each client starts a conversation (201) and posts 9 more
   messages into it, then starts another, so no conversation grows past ~40 events.
4. The reference Company of ``personal-agent-protocol`` 0.26 (its demo company Manzanita
   under uvicorn, started by ``bench/ref_company.py`` in the separate venv ``--ref-venv``),
   driven by the same client through the same cells and the POST cost by message number;
   ratios ours / reference.

Results: tables on stdout and ``var/bench/latency.json``; published by hand in
``docs/benchmarks.md``. Everything is bounded (``--duration`` per cell, ``--turns``) and the
script stops what it started.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import json
import os
import platform
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.multiprocess.cluster import (  # noqa: E402
    BENCH_ENV,
    PG_ADMIN,
    SERVERS,
    Cluster,
    cpu_seconds,
    free_port,
)

PATH = "/poppy/conversations"
DEV_CLIENT_ID = "https://agent.example/dev-client"
CEILING = f"{PATH}/ceiling"  # bench/ceiling.py
#: A short conversation takes this many POSTs (the first starts it), then another is started.
ROTATE = 10


# -- the machine --------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    def first(path: str, prefix: str) -> str:
        with contextlib.suppress(OSError):
            for line in Path(path).read_text().splitlines():
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip()
        return "unknown"

    def version(command: list[str]) -> str:
        try:
            return subprocess.run(
                command, capture_output=True, text=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return "unknown"

    import django
    import httpx
    import psycopg
    import uvicorn

    pg = "unknown"
    with contextlib.suppress(Exception), psycopg.connect(PG_ADMIN) as conn:
        pg = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
    return {
        "nproc": os.cpu_count(),
        "cpu": first("/proc/cpuinfo", "model name"),
        "memory": first("/proc/meminfo", "MemTotal"),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "django": django.get_version(),
        "uvicorn": uvicorn.__version__,
        "httpx": httpx.__version__,
        "postgresql": pg,
        "redis": version(["redis-server", "--version"]).split(" ")[2].removeprefix("v=")
        if shutil.which("redis-server")
        else "missing",
    }


# -- statistics ---------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(value: float) -> str:
    return f"{value * 1000:7.1f}"


# -- processes ----------------------------------------------------------------------------


def wait_port(port: int, process: subprocess.Popen[bytes], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port}")


def launcher(tmp: Path, port: int, args: argparse.Namespace) -> Cluster:
    """Production mode on the shared launcher, every process with the ceiling route and the
    timeline (``bench/ceiling_settings.py``)."""
    return Cluster(
        tmp,
        name=args.db,
        server=args.server,
        server_workers=args.workers,
        log_level="warning",
        env={
            **BENCH_ENV,
            "POPPY_BASE_URL": f"http://127.0.0.1:{port}",
            # The development authority mints the bench's tokens: the explicit opt-in.
            "POPPY_DEV_AUTHORITY": "1",
            "DJANGO_SETTINGS_MODULE": "bench.ceiling_settings",
            "POPPY_BENCH_TIMELINE": str(timeline_path(tmp)),
        },
    )


def create_without_discovery_checks(cluster: Cluster) -> None:
    """:meth:`Cluster.create`, migrating with ``--skip-checks``: with DEBUG off and
    ``POPPY_BASE_URL`` set, checks E301/E302 refuse the plain-http loopback origin the bench
    serves on (no personal agent but the bench's own connects to it)."""
    cluster.start_redis()
    cluster.pg(f'DROP DATABASE IF EXISTS "{cluster.name}" WITH (FORCE)')
    cluster.pg(f'CREATE DATABASE "{cluster.name}"')
    cluster.manage("migrate", "-v0", "--skip-checks")


def timeline_path(tmp: Path) -> Path:
    """Where the servers' processes write their moments (``bench/timeline.py``)."""
    return tmp / "timeline.log"


def web(cluster: Cluster, port: int, authenticate: str) -> int:
    """(Re)start the web server with this verifier and the ceiling route; its pid."""
    cluster.stop("web")
    cluster.web("web", port=port, env={"POPPY_AUTHENTICATE": authenticate})
    return cluster.pid("web")


# -- the light client ---------------------------------------------------------------------


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


class Signer:
    """ES256 DPoP proofs with ``cryptography`` directly: the header (constant per key) and
    ``ath`` (constant per token) are built once, as any client may; ``jti``, ``iat``,
    ``htm``, ``htu`` and the signature are fresh for every request."""

    def __init__(self, private_key: Any, token: str | None) -> None:
        from poppy_django.verifier.jwk import public_jwk

        self.key = private_key
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": public_jwk(private_key.public_key())}
        self.header = b64url(json.dumps(header, separators=(",", ":")).encode())
        self.ath = b64url(hashlib.sha256(token.encode()).digest()) if token else None

    def proof(self, method: str, htu: str) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        claims = {
            "jti": secrets.token_urlsafe(16),
            "htm": method,
            "htu": htu,
            "iat": int(time.time()),
        }
        if self.ath:
            claims["ath"] = self.ath
        signing_input = (
            f"{self.header}.{b64url(json.dumps(claims, separators=(',', ':')).encode())}"
        )
        r, s = decode_dss_signature(
            self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        )
        return f"{signing_input}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


@dataclass
class Conversation:
    id: str
    cursor: str  # 4 events before the end: a read returns those 4
    size: int


@dataclass
class Agent:
    """One personal agent for one User: its credentials and conversations."""

    name: str
    authorization: str
    signer: Signer | None  # None: the fake verifier (no proof)
    conversations: dict[int, Conversation] = field(default_factory=dict)
    short: str = ""  # the short conversation POSTs go to (see post_short)
    short_posts: int = 0


@dataclass
class Target:
    """A server to drive: where to connect and what URL the proofs name."""

    name: str
    port: int
    public: str  # the public origin proofs name (htu)
    agents: list[Agent]
    pid: int | None = None
    #: Our Celery worker: its CPU per request is reported beside the web process's.
    worker_pid: int | None = None


class Http:
    """One raw HTTP/1.1 keep-alive connection: as little client CPU per request as can be."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(
        self, method: str, target: str, headers: dict[str, str], body: bytes = b""
    ) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        lines = [f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body or method == "POST":
            lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        length, chunked, close = None, False, False
        for line in header_lines:
            name, _, value = line.partition(":")
            name = name.lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
            elif name == "connection" and "close" in value.lower():
                close = True
        if chunked:
            parts = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                data = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                parts.append(data[:-2])
            payload = b"".join(parts)
        else:
            payload = await self.reader.readexactly(length or 0)
        if close:
            await self.close()
        return status, payload

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
        self.reader = self.writer = None


def auth_headers(target: Target, agent: Agent, method: str, path: str) -> dict[str, str]:
    headers = {"Authorization": agent.authorization, "Accept": "application/json"}
    if agent.signer is not None:
        headers["DPoP"] = agent.signer.proof(method, target.public + path)
    return headers


_message_numbers = iter(range(10**9))


def message_body() -> bytes:
    number = next(_message_numbers)
    message = {"id": f"b{number}_{secrets.token_hex(6)}", "sender": "agent", "text": f"hi {number}"}
    return json.dumps({"message": message}).encode()


async def post_into(http: Http, target: Target, agent: Agent, conversation_id: str) -> int:
    path = f"{PATH}/{conversation_id}/messages"
    headers = auth_headers(target, agent, "POST", path)
    status, _ = await http.request("POST", path, headers, message_body())
    return status


async def start_conversation(http: Http, target: Target, agent: Agent) -> tuple[int, str]:
    """POST the endpoint: a new conversation with a first message; (status, its id)."""
    headers = auth_headers(target, agent, "POST", PATH)
    status, body = await http.request("POST", PATH, headers, message_body())
    return status, json.loads(body)["conversation_id"] if status == 201 else ""


async def post_message(http: Http, target: Target, agent: Agent, size: int) -> int:
    return await post_into(http, target, agent, agent.conversations[size].id)


async def post_short(http: Http, target: Target, agent: Agent, size: int) -> int:
    """A short conversation's POST: every ``ROTATE``-th starts a new conversation (201)."""
    if agent.short_posts % ROTATE == 0:
        status, agent.short = await start_conversation(http, target, agent)
    else:
        status = await post_into(http, target, agent, agent.short)
    agent.short_posts += 1
    return status


async def read_events(http: Http, target: Target, agent: Agent, size: int) -> int:
    conversation = agent.conversations[size]
    path = f"{PATH}/{conversation.id}/events"
    status, _ = await http.request(
        "GET", f"{path}?cursor={conversation.cursor}", auth_headers(target, agent, "GET", path)
    )
    return status


async def ceiling(http: Http, target: Target, agent: Agent, size: int) -> int:
    """The bare view of bench/ceiling.py, with the same proof a read carries (unchecked)."""
    status, _ = await http.request("GET", CEILING, auth_headers(target, agent, "GET", CEILING))
    return status


Operation = Callable[[Http, Target, Agent, int], Awaitable[int]]


async def run_cell(
    target: Target,
    operation: Operation,
    size: int,
    clients: int,
    duration: float,
    warmup: float,
) -> dict[str, Any]:
    """``clients`` loops, each its own agent and connection, for warmup + duration seconds.

    Latencies and req/s count the requests after the warmup; the CPU per request divides the
    whole cell's CPU by every request the cell completed, the warmup's included.
    """
    agents = target.agents[:clients]
    latencies: list[float] = []
    completed = 0
    errors: dict[int, int] = {}
    start = time.perf_counter()
    measure_from = start + warmup
    end = measure_from + duration
    cpu0 = time.process_time()
    processes = {"server": target.pid, "worker": target.worker_pid}
    cpu_before = {name: cpu_seconds(pid) for name, pid in processes.items() if pid}

    async def loop(agent: Agent) -> None:
        nonlocal completed
        http = Http(target.port)
        try:
            while (began := time.perf_counter()) < end:
                status = await operation(http, target, agent, size)
                done = time.perf_counter()
                completed += 1
                if status >= 300:
                    errors[status] = errors.get(status, 0) + 1
                elif began >= measure_from:
                    latencies.append(done - began)
        finally:
            await http.close()

    await asyncio.gather(*(loop(agent) for agent in agents))
    wall = time.perf_counter() - start
    client_cpu = time.process_time() - cpu0
    cpu_per_request = {
        f"{name}_cpu_ms_per_req": 1000 * (cpu_seconds(processes[name]) - before) / completed
        for name, before in cpu_before.items()
        if completed
    }
    total = len(latencies)
    return {
        "clients": clients,
        "size": size,
        "requests": total,
        "completed": completed,  # the warmup's included: what the CPU figures divide by
        "rps": total / duration,
        "p50_ms": pct(latencies, 0.50) * 1000,
        "p99_ms": pct(latencies, 0.99) * 1000,
        "errors": errors,
        "client_cpu_pct": 100 * client_cpu / wall,
        **cpu_per_request,
    }


# -- Django in this process: tokens, seeding, the verifier alone --------------------------


def setup_django(env: dict[str, str], authenticate: str) -> None:
    for name in (
        "DATABASE_URL",
        "REDIS_URL",
        "POPPY_VAR_DIR",
        "POPPY_BASE_URL",
        "POPPY_LOG_LEVEL",
        "DJANGO_DEBUG",
        "POPPY_DEV_AUTHORITY",
        "POPPY_ALLOW_FAKE_VERIFIER",
        "DJANGO_SETTINGS_MODULE",
        "POPPY_CELERY_QUEUE",
    ):
        os.environ[name] = env[name]
    os.environ["POPPY_AUTHENTICATE"] = authenticate
    import django

    django.setup()


def dpop_agent(name: str) -> Agent:
    from cryptography.hazmat.primitives.asymmetric import ec

    from poppy_django.authority.tokens import mint_development_token
    from poppy_django.verifier.jwk import public_jwk, thumbprint

    key = ec.generate_private_key(ec.SECP256R1())
    token = mint_development_token(
        user=name, jkt=thumbprint(public_jwk(key.public_key())), ttl=3 * 3600
    )
    return Agent(name, f"DPoP {token}", Signer(key, token))


def fake_agent(name: str) -> Agent:
    from poppy_django.verifier.fake import fake_authorization

    return Agent(name, fake_authorization(client_id=DEV_CLIENT_ID, user_id=name), None)


def seed(agents: list[Agent], sizes: list[int]) -> float:
    """Conversations of ``size`` events for every agent, by bulk inserts; seconds taken.

    Whole turns (user message, working, company reply, idle); a size that is not a multiple
    of 4 ends with context-only user messages (which start no turn). ``last_seq`` = N,
    ``answered_seq``/``turn_upto_seq`` = the last answered message, and the agent thread
    holds the entries those turns would have left (one row each).
    """
    from django.db import transaction

    from poppy_django import ids
    from poppy_django.models import AgentThread, AgentThreadEntry, Event
    from poppy_django.models import Conversation as Row

    started = time.perf_counter()
    for agent in agents:
        principal = {
            "client_id": DEV_CLIENT_ID,
            "user_id": agent.name,
            "account_id": None,
            "session_id": "ses_bench",
            "signed_in": False,
            "scopes": [],
            "actor": None,
        }
        for size in sizes:
            with transaction.atomic():
                row = Row.objects.create(
                    client_id=DEV_CLIENT_ID, user_id=agent.name, agent_name="support", status="idle"
                )
                events: list[Event] = []
                history: list[dict[str, str]] = []
                answered = 0
                seq = 0

                def add(
                    type_: str,
                    payload: dict[str, Any],
                    message_id: str | None = None,
                    role: str = "",
                    meta: dict[str, Any] | None = None,
                    row: Row = row,
                    events: list[Event] = events,
                ) -> int:
                    nonlocal seq
                    seq += 1
                    events.append(
                        Event(
                            conversation=row,
                            seq=seq,
                            type=type_,
                            payload=payload,
                            meta=meta or {},
                            message_id=message_id,
                            role=role,
                        )
                    )
                    return seq

                for turn in range(size // 4):
                    text = f"hello {turn}"
                    mid = f"seed_{turn}"
                    answered = add(
                        "message",
                        {"message": {"id": mid, "role": "user", "sender": "agent", "text": text}},
                        mid,
                        "user",
                        {"principal": principal},
                    )
                    add("state", {"status": "working", "responder": "agent"})
                    reply_id = ids.company_message_id(row.id, f"seed-{turn}")
                    reply = f"You said: {text}"
                    add(
                        "message",
                        {
                            "message": {
                                "id": reply_id,
                                "role": "company",
                                "sender": "agent",
                                "text": reply,
                            }
                        },
                        reply_id,
                        "company",
                        {"turn": f"seed-{turn}"},
                    )
                    add("state", {"status": "idle", "responder": "agent"})
                    history += [
                        {"role": "user", "text": text},
                        {"role": "assistant", "text": reply},
                    ]
                for extra in range(size % 4):
                    mid = f"seedctx_{extra}"
                    add(
                        "message",
                        {
                            "message": {
                                "id": mid,
                                "role": "user",
                                "sender": "agent",
                                "context": {"locale": "en"},
                            }
                        },
                        mid,
                        "user",
                        {"principal": principal},
                    )
                Event.objects.bulk_create(events, batch_size=2000)
                Row.objects.filter(pk=row.pk).update(
                    last_seq=seq, answered_seq=answered, turn_upto_seq=answered
                )
                if history:
                    thread = AgentThread.objects.create(
                        conversation=row,
                        actor_id=ids.anonymous_actor_id(DEV_CLIENT_ID, agent.name),
                        last_position=len(history),
                    )
                    AgentThreadEntry.objects.bulk_create(
                        (
                            AgentThreadEntry(thread=thread, position=position, **entry)
                            for position, entry in enumerate(history, start=1)
                        ),
                        batch_size=2000,
                    )
            agent.conversations[size] = Conversation(
                row.id, ids.event_id(row.id, max(1, seq - 4)), size
            )
    return time.perf_counter() - started


def wait_idle(agents: list[Agent], timeout: float = 180) -> float:
    """Until no turn is left to run in these agents' conversations (the worker drained)."""
    from poppy_django.models import Conversation as Row

    users = [agent.name for agent in agents]
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if not Row.objects.filter(user_id__in=users, status="working").exists():
            return time.monotonic() - started
        time.sleep(0.2)
    raise RuntimeError("turns did not drain")


def verifier_cost(base: str, n: int) -> dict[str, Any]:
    """``poppy_django.verifier.dpop.verify`` on pre-made valid requests, fresh jti each (µs)."""
    from poppy_django.verifier import dpop

    agent = dpop_agent("lat-verifier")
    assert agent.signer is not None
    url = f"{base}{PATH}/cnv_x/events"
    requests = [
        {
            "method": "GET",
            "url": url,
            "headers": {
                "authorization": agent.authorization,
                "dpop": agent.signer.proof("GET", url),
            },
        }
        for _ in range(n)
    ]
    dpop.verify(requests.pop())  # build the verifier, warm the Redis connection
    timings = []
    for info in requests:
        start = time.perf_counter_ns()
        dpop.verify(info)  # type: ignore[arg-type]
        timings.append((time.perf_counter_ns() - start) / 1000)
    result = {
        "n": len(timings),
        "median_us": statistics.median(timings),
        "p95_us": pct(timings, 0.95),
    }

    # Where it goes: the same without the replay cache, and the replay cache's add alone,
    # once on this thread's (reused) cache backend and once on a backend created for the
    # call, as a request under ASGI gets one (django.core.cache.caches is per context).
    from django.core.cache import caches

    from poppy_django.verifier import replay

    fresh = [
        {**info, "headers": {**info["headers"], "dpop": agent.signer.proof("GET", url)}}
        for info in requests[: n // 2]
    ]
    original = replay.first_use
    replay.first_use = lambda *args, **kwargs: True  # type: ignore[assignment]
    try:
        no_replay = []
        for info in fresh:
            start = time.perf_counter_ns()
            dpop.verify(info)  # type: ignore[arg-type]
            no_replay.append((time.perf_counter_ns() - start) / 1000)
    finally:
        replay.first_use = original
    reused, created = [], []
    for number in range(n // 2):
        start = time.perf_counter_ns()
        caches["default"].add(f"poppy:bench:{number}:{secrets.token_hex(4)}", 1, timeout=5)
        reused.append((time.perf_counter_ns() - start) / 1000)
        start = time.perf_counter_ns()
        backend = caches.create_connection("default")
        backend.add(f"poppy:bench:{number}:{secrets.token_hex(4)}", 1, timeout=5)
        created.append((time.perf_counter_ns() - start) / 1000)
        backend.close()
    result.update(
        without_replay_median_us=statistics.median(no_replay),
        replay_add_reused_backend_median_us=statistics.median(reused),
        replay_add_new_backend_median_us=statistics.median(created),
    )
    return result


def client_cost(n: int) -> dict[str, Any]:
    """What one proof costs the client: this bench's signer and poppy_django.client's."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from poppy_django.client import DPoPKey

    key = ec.generate_private_key(ec.SECP256R1())
    token = "x" * 500
    signer = Signer(key, token)
    dpop_key = DPoPKey(key)
    url = "http://127.0.0.1:1/poppy/conversations/cnv_x/messages"
    result = {}
    for name, sign in (
        ("bench signer", lambda: signer.proof("POST", url)),
        ("poppy_django.client.DPoPKey", lambda: dpop_key.proof("POST", url, access_token=token)),
    ):
        timings = []
        for _ in range(n):
            start = time.perf_counter_ns()
            sign()
            timings.append((time.perf_counter_ns() - start) / 1000)
        result[name] = statistics.median(timings)
    return result


# -- 1. turn latency ----------------------------------------------------------------------


async def turn_latency(
    target: Target, agent: Agent, size: int, turns: int, timeline: Path
) -> dict[str, Any]:
    """POST → first text-delta on an open SSE stream, and → reply seen by a long-poll; the
    moments between them in the server's processes (``timeline``); and the CPU a turn costs
    the web process and the worker (readers' wake-ups included)."""
    import httpx

    from poppy_django.client import iter_sse

    conversation = agent.conversations[size]
    events_path = f"{PATH}/{conversation.id}/events"
    base = f"http://127.0.0.1:{target.port}"
    last_id = ids_last = conversation.cursor
    state: dict[str, Any] = {"posted": None, "delta": None, "sse_reply": None, "poll_reply": None}
    progress = asyncio.Event()
    stop = False

    async def sse() -> None:
        nonlocal last_id
        async with httpx.AsyncClient(timeout=httpx.Timeout(60, read=None)) as client:
            while not stop:
                headers = {
                    **auth_headers(target, agent, "GET", events_path),
                    "Accept": "text/event-stream",
                    "Last-Event-ID": last_id,
                }
                async with client.stream("GET", base + events_path, headers=headers) as response:
                    assert response.status_code == 200, await response.aread()
                    block: list[str] = []
                    async for line in response.aiter_lines():
                        block.append(line)
                        if line:
                            continue
                        # A blank line ends a frame: the client's parser reads it.
                        for frame in iter_sse(block):
                            now = time.perf_counter()
                            data = frame.json()
                            if frame.id is not None:
                                last_id = frame.id
                            if state["posted"] is not None:
                                if frame.event == "text-delta" and state["delta"] is None:
                                    state["delta"] = now
                                elif (
                                    data.get("type") == "message"
                                    and data["message"]["role"] == "company"
                                    and state["sse_reply"] is None
                                ):
                                    state["sse_reply"] = now
                                    progress.set()
                        block = []
                        if stop:
                            return

    async def poll() -> None:
        nonlocal ids_last
        http = Http(target.port)
        try:
            while not stop:
                status, body = await http.request(
                    "GET",
                    f"{events_path}?cursor={ids_last}&wait=30",
                    auth_headers(target, agent, "GET", events_path),
                )
                now = time.perf_counter()
                assert status == 200, body
                page = json.loads(body)
                ids_last = page["cursor"]
                for event in page["events"]:
                    if (
                        event["type"] == "message"
                        and event["message"]["role"] == "company"
                        and state["posted"] is not None
                        and state["poll_reply"] is None
                    ):
                        state["poll_reply"] = now
                        progress.set()
                    if event["type"] == "state" and event["status"] == "idle":
                        state["idle"] = True
                        progress.set()
        finally:
            await http.close()

    readers = [asyncio.ensure_future(sse()), asyncio.ensure_future(poll())]
    await asyncio.sleep(1.0)  # both readers are waiting
    deltas, sse_replies, poll_replies, posts = [], [], [], []
    posted_at: list[float] = []  # each POST's wall clock, to place the servers' moments
    without_delta = 0
    http = Http(target.port)
    assert target.pid is not None and target.worker_pid is not None
    web_pid, worker_pid = target.pid, target.worker_pid
    cpu0 = {"web": cpu_seconds(web_pid), "worker": cpu_seconds(worker_pid)}
    try:
        for _ in range(turns):
            state.update(posted=None, delta=None, sse_reply=None, poll_reply=None, idle=False)
            posted = time.perf_counter()
            posted_at.append(time.time())
            state["posted"] = posted
            status = await post_message(http, target, agent, size)
            posts.append(time.perf_counter() - posted)
            assert status == 202, status
            deadline = time.monotonic() + 30
            # No delta at all is possible: a stream whose re-read already found the complete
            # message drops its pieces (the wire sends pieces before their message, never after).
            while not (state["sse_reply"] and state["poll_reply"] and state.get("idle")):
                progress.clear()
                if time.monotonic() > deadline:
                    raise RuntimeError(f"turn did not complete: {state}")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(progress.wait(), 1.0)
            if state["delta"] is None:
                without_delta += 1
            else:
                deltas.append(state["delta"] - posted)
            sse_replies.append(state["sse_reply"] - posted)
            poll_replies.append(state["poll_reply"] - posted)
        cpu = {
            "web": cpu_seconds(web_pid) - cpu0["web"],
            "worker": cpu_seconds(worker_pid) - cpu0["worker"],
        }
    finally:
        stop = True
        await http.close()
        for reader in readers:
            reader.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*readers, return_exceptions=True)

    def summary(values: list[float]) -> dict[str, float]:
        return {"p50_ms": pct(values, 0.5) * 1000, "p99_ms": pct(values, 0.99) * 1000}

    return {
        "turns": turns,
        "size": size,
        "post": summary(posts),
        "first_delta": summary(deltas),
        "replies_without_delta": without_delta,
        "sse_reply": summary(sse_replies),
        "long_poll_reply": summary(poll_replies),
        "server_moments": {
            moment: summary(offsets)
            for moment, offsets in server_moments(timeline, conversation.id, posted_at).items()
        },
        "cpu_ms_per_turn": {name: seconds * 1000 / turns for name, seconds in cpu.items()},
    }


#: The servers' moments of a turn (``bench/timeline.py``).
MOMENTS = ("message_received", "dispatched", "task_started", "turn_started", "turn_finished")


def server_moments(
    timeline: Path, conversation_id: str, posted_at: list[float]
) -> dict[str, list[float]]:
    """Each moment's delay after its turn's POST was sent (s): the first of its kind between
    that POST and the next one."""
    seen: dict[str, list[float]] = {moment: [] for moment in MOMENTS}
    for line in timeline.read_text().splitlines():
        at, moment, conversation = line.split()
        if conversation == conversation_id and moment in seen:
            seen[moment].append(float(at))
    ends = [*posted_at[1:], float("inf")]
    offsets: dict[str, list[float]] = {moment: [] for moment in MOMENTS}
    for moment, times in seen.items():
        for start, end in zip(posted_at, ends):
            first = next((t for t in times if start <= t < end), None)
            if first is not None:
                offsets[moment].append(first - start)
    return offsets


async def await_reply(http: Http, target: Target, agent: Agent, events: str, cursor: str) -> str:
    """Read on until a company message, then the ``idle`` state, are past ``cursor``."""
    replied = False
    while True:
        query = f"?wait=5&cursor={cursor}" if cursor else "?wait=5"
        headers = auth_headers(target, agent, "GET", events)
        status, body = await http.request("GET", events + query, headers)
        assert status == 200, body
        page = json.loads(body)
        cursor = page["cursor"] or cursor
        for event in page["events"]:
            if event["type"] == "message" and event["message"]["role"] == "company":
                replied = True
            elif replied and event["type"] == "state" and event["status"] == "idle":
                return cursor
        if replied and not page["events"]:  # a server that shows no state after the reply
            return cursor


async def post_growth(target: Target, agent: Agent, messages: int) -> dict[str, Any]:
    """POST cost at message ~2 and at message ~``messages`` of one conversation: one client
    posts and awaits each reply (not timed) before the next, so every POST finds the
    conversation idle and one turn longer."""
    http = Http(target.port)
    timings: list[float] = []
    try:
        status, conversation_id = await start_conversation(http, target, agent)
        assert status == 201, status
        events = f"{PATH}/{conversation_id}/events"
        cursor = await await_reply(http, target, agent, events, "")
        for _ in range(messages - 1):
            started = time.perf_counter()
            status = await post_into(http, target, agent, conversation_id)
            timings.append(time.perf_counter() - started)
            assert status == 202, status
            cursor = await await_reply(http, target, agent, events, cursor)
    finally:
        await http.close()
    window = max(1, min(10, len(timings) // 4))
    return {
        "messages": messages,
        "window": window,
        "early_ms": statistics.median(timings[:window]) * 1000,
        "late_ms": statistics.median(timings[-window:]) * 1000,
    }


async def reference_turn_latency(target: Target, agent: Agent, turns: int) -> dict[str, Any]:
    """The reference answers inline: POST ``?wait=0`` returns the page with the reply."""
    conversation = agent.conversations[10]
    path = f"{PATH}/{conversation.id}/messages"
    http = Http(target.port)
    timings = []
    try:
        for number in range(turns):
            body = json.dumps(
                {
                    "message": {
                        "id": f"t{number}_{secrets.token_hex(6)}",
                        "sender": "agent",
                        "text": "hello",
                    }
                }
            ).encode()
            start = time.perf_counter()
            status, payload = await http.request(
                "POST",
                f"{path}?wait=0&cursor={conversation.cursor}",
                auth_headers(target, agent, "POST", path),
                body,
            )
            timings.append(time.perf_counter() - start)
            assert status == 202, payload
            assert any(
                e["type"] == "message" and e["message"]["role"] == "company"
                for e in json.loads(payload)["events"]
            ), payload
            conversation.cursor = json.loads(payload)["cursor"]
    finally:
        await http.close()
    return {
        "turns": turns,
        "reply_in_post": {"p50_ms": pct(timings, 0.5) * 1000, "p99_ms": pct(timings, 0.99) * 1000},
    }


# -- the reference Company ----------------------------------------------------------------


@contextlib.contextmanager
def reference(venv: Path, tmp: Path, users: int, sizes: list[int]) -> Iterator[Target | str]:
    python = venv / "bin" / "python"
    if not python.exists():
        yield (
            f"no reference venv at {venv} (python3 -m venv {venv}; "
            f"{venv}/bin/pip install personal-agent-protocol==0.26.0)"
        )
        return
    port = free_port()
    creds = tmp / "ref-creds.json"
    log = open(tmp / "ref.log", "wb")  # noqa: SIM115
    process = subprocess.Popen(
        [
            str(python),
            str(ROOT / "bench" / "ref_company.py"),
            "--port",
            str(port),
            "--users",
            str(users),
            "--sizes",
            ",".join(map(str, sizes)),
            "--creds",
            str(creds),
            "--max-seconds",
            "1800",
        ],
        cwd=tmp,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_port(port, process, "the reference Company", timeout=600)
        from cryptography.hazmat.primitives import serialization

        data = json.loads(creds.read_text())
        public = data["endpoint"].removesuffix(PATH)
        agents = []
        for user in data["users"]:
            key = serialization.load_pem_private_key(user["dpop_key_pem"].encode(), None)
            agent = Agent(user["user"], f"DPoP {user['token']}", Signer(key, user["token"]))
            for size, conversation in user["conversations"].items():
                agent.conversations[int(size)] = Conversation(
                    conversation["id"], conversation["events"][-5], int(size)
                )
            agents.append(agent)
        yield Target("reference", port, public, agents, process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


# -- the run ------------------------------------------------------------------------------


def print_cells(title: str, cells: list[dict[str, Any]]) -> None:
    print(f"\n{title}")
    print(
        "  op     events clients    req/s   p50 ms   p99 ms  client CPU  server CPU/req"
        "  worker CPU/req  errors"
    )
    for cell in cells:
        cpu = [cell.get("server_cpu_ms_per_req"), cell.get("worker_cpu_ms_per_req")]
        shown = [f"{ms:9.2f} ms" if ms is not None else "        -   " for ms in cpu]
        print(
            f"  {cell['op']:5} {cell['size']:7} {cell['clients']:7} {cell['rps']:8.0f}"
            f" {cell['p50_ms']:8.1f} {cell['p99_ms']:8.1f} {cell['client_cpu_pct']:10.0f}%"
            f" {shown[0]}    {shown[1]}  {cell['errors'] or ''}"
        )


async def cells_for(
    target: Target,
    sizes: list[int],
    clients: list[int],
    args: Any,
    drain: Callable[[], None] | None,
    with_ceiling: bool = False,
) -> list[dict[str, Any]]:
    """Every op x size x clients; the smallest size's POSTs go to short conversations."""
    results = []
    for size in sizes:
        post = post_short if size == sizes[0] else post_message
        ops: list[tuple[str, Operation]] = [("read", read_events), ("post", post)]
        if with_ceiling and size == sizes[0]:
            ops.insert(0, ("ceil", ceiling))
        for name, operation in ops:
            for count in clients:
                cell = await run_cell(target, operation, size, count, args.duration, args.warmup)
                cell.update(op=name, target=target.name)
                results.append(cell)
                print_cells(f"[{target.name}]", [cell])
                if name == "post" and drain is not None:
                    await asyncio.to_thread(drain)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument(
        "--long-turns", type=int, default=50, help="turns on the 10,000-event conversation"
    )
    parser.add_argument("--duration", type=float, default=6.0, help="seconds per cell")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--sizes", default="10,1000,10000")
    parser.add_argument("--verifier-n", type=int, default=2000)
    parser.add_argument("--server", choices=SERVERS, default="uvicorn", help="our ASGI server")
    parser.add_argument("--workers", type=int, default=1, help="our server's web processes")
    parser.add_argument(
        "--growth", type=int, default=200, help="POST cost at message 2 vs this one (0: skip)"
    )
    parser.add_argument("--ref-venv", default=str(ROOT / "var" / "bench" / "ref-venv"))
    parser.add_argument("--no-reference", action="store_true")
    parser.add_argument("--db", default="poppy_bench_lat", help="the database (dropped)")
    parser.add_argument("--out", default=str(ROOT / "var" / "bench" / "latency.json"))
    args = parser.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    sizes = [int(s) for s in args.sizes.split(",")]
    most = max(clients)

    info = machine()
    info["server"] = f"{args.server} {metadata.version(args.server)}, {args.workers} process(es)"
    print("machine: " + ", ".join(f"{k}={v}" for k, v in info.items()))
    results: dict[str, Any] = {"machine": info, "args": vars(args), "started": time.time()}
    tmp = Path(tempfile.mkdtemp(prefix="poppy-bench-lat-"))
    port = free_port()
    cluster = launcher(tmp, port, args)
    try:
        create_without_discovery_checks(cluster)
        worker = cluster.worker("celery").pid
        setup_django(cluster.env, "poppy_django.verifier.dpop.verify")
        public = f"http://127.0.0.1:{port}"

        dpop_agents = [dpop_agent(f"lat-dpop-{n}") for n in range(most)]
        turn_agent = dpop_agent("lat-turns")
        fake_agents = [fake_agent(f"lat-fake-{n}") for n in range(most)]
        seconds = seed(dpop_agents, sizes) + seed(fake_agents, [sizes[0]])
        seconds += seed([turn_agent], sorted({sizes[0], sizes[-1]}))
        print(f"seeded in {seconds:.1f} s")
        results["client_proof_us"] = client_cost(2000)
        results["verifier"] = verifier_cost(public, args.verifier_n)
        print(f"verifier breakdown: {json.dumps(results['verifier'])}")
        print(
            f"verifier alone (in-process, Redis replay cache): median "
            f"{results['verifier']['median_us']:.0f} µs, p95 {results['verifier']['p95_us']:.0f}"
            f" µs; client proof: "
            + ", ".join(f"{k} {v:.0f} µs" for k, v in results["client_proof_us"].items())
        )

        # Our server, DPoP verification.
        pid = web(cluster, port, "poppy_django.verifier.dpop.verify")
        ours = Target("ours", port, public, dpop_agents, pid, worker)
        results["turns"] = asyncio.run(
            turn_latency(ours, turn_agent, sizes[0], args.turns, timeline_path(tmp))
        )
        print(
            f"\n1. turn latency ({args.turns} turns, {sizes[0]} events): "
            + json.dumps(results["turns"])
        )
        if sizes[-1] != sizes[0] and args.long_turns:
            results["turns_long"] = asyncio.run(
                turn_latency(ours, turn_agent, sizes[-1], args.long_turns, timeline_path(tmp))
            )
            print(
                f"   on {sizes[-1]} events ({args.long_turns} turns): "
                + json.dumps(results["turns_long"])
            )
        if args.growth:
            results["growth"] = asyncio.run(post_growth(ours, turn_agent, args.growth))
            print(f"   POST cost by message number: {json.dumps(results['growth'])}")
        wait_idle([turn_agent])

        def drain_ours() -> None:
            wait_idle(dpop_agents + fake_agents)

        results["ours"] = asyncio.run(cells_for(ours, sizes, clients, args, drain_ours, True))

        # Our server again, the fake verifier (no verification).
        pid = web(cluster, port, "poppy_django.verifier.fake.verify")
        fake = Target("ours-fake", port, public, fake_agents, pid, worker)
        results["ours_fake"] = asyncio.run(cells_for(fake, sizes[:1], clients, args, drain_ours))
        cluster.stop("web")
        cluster.stop("celery")  # the reference gets the machine to itself too

        if args.no_reference:
            results["reference"] = "skipped (--no-reference)"
        else:
            with reference(Path(args.ref_venv), tmp, most + 1, sizes) as ref:
                if isinstance(ref, str):
                    results["reference"] = ref
                    print(f"\nreference: {ref}")
                else:
                    results["reference_turns"] = asyncio.run(
                        reference_turn_latency(ref, ref.agents[-1], args.turns)
                    )
                    if args.growth:
                        results["reference_growth"] = asyncio.run(
                            post_growth(ref, ref.agents[-1], args.growth)
                        )
                    ref.agents = ref.agents[:most]
                    results["reference"] = asyncio.run(cells_for(ref, sizes, clients, args, None))
        report(results)
    finally:
        cluster.destroy()
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=2, default=str))
        print(f"\nwritten: {args.out} (server logs in {tmp})")


def report(results: dict[str, Any]) -> None:
    print("\n==== summary ====")
    turns = results["turns"]
    print(f"1. turn latency over {turns['turns']} turns ({turns['size']} events), ms p50/p99:")
    for name in ("post", "first_delta", "sse_reply", "long_poll_reply"):
        print(f"   {name:16} {turns[name]['p50_ms']:7.1f} {turns[name]['p99_ms']:7.1f}")
    print(f"   replies the stream showed before any piece: {turns['replies_without_delta']}")
    print("   the turn's moments after the POST was sent (client and servers), ms p50/p99:")
    moments = {
        **{name: turns[name] for name in ("post", "first_delta", "long_poll_reply")},
        **turns["server_moments"],
    }
    for name, figures in sorted(moments.items(), key=lambda item: item[1]["p50_ms"]):
        print(f"     {name:18} {figures['p50_ms']:7.1f} {figures['p99_ms']:7.1f}")
    cpu = turns["cpu_ms_per_turn"]
    print(f"   CPU per turn: web process {cpu['web']:.1f} ms, worker {cpu['worker']:.1f} ms")
    if "turns_long" in results:
        long = results["turns_long"]
        print(f"   on {long['size']} events ({long['turns']} turns):")
        for name in ("post", "first_delta", "sse_reply", "long_poll_reply"):
            print(f"   {name:16} {long[name]['p50_ms']:7.1f} {long[name]['p99_ms']:7.1f}")
    for key, name in (("growth", "ours"), ("reference_growth", "reference")):
        if key in results:
            growth = results[key]
            print(
                f"   POST cost at message 2 vs {growth['messages']} ({name}, medians of "
                f"{growth['window']}): {growth['early_ms']:.1f} vs {growth['late_ms']:.1f} ms"
            )
    print_cells("2./3. ours, DPoP verification", results["ours"])
    floor = {c["clients"]: c["rps"] for c in results["ours"] if c["op"] == "ceil"}
    print("\n   req/s of each route / the ceiling's (the framework's floor):")
    for cell in results["ours"]:
        if cell["op"] != "ceil" and floor.get(cell["clients"]):
            print(
                f"   {cell['op']:5} {cell['size']:6} x{cell['clients']:<3}"
                f" {cell['rps'] / floor[cell['clients']]:6.2f}"
            )
    print_cells("2. ours, fake verifier", results["ours_fake"])
    verifier = results["verifier"]
    print(
        f"   verifier alone: median {verifier['median_us']:.0f} µs (p95 "
        f"{verifier['p95_us']:.0f} µs) per request"
    )
    if isinstance(results.get("reference"), list):
        print_cells("4. reference Company (personal-agent-protocol 0.26)", results["reference"])
        ref = {(c["op"], c["size"], c["clients"]): c for c in results["reference"]}
        print("\n   ratios ours / reference (req/s; p50; p99):")
        for cell in results["ours"]:
            other = ref.get((cell["op"], cell["size"], cell["clients"]))
            if other and other["rps"]:
                print(
                    f"   {cell['op']:5} {cell['size']:6} x{cell['clients']:<3}"
                    f" req/s {cell['rps'] / other['rps']:6.2f}"
                    f"  p50 {cell['p50_ms'] / other['p50_ms']:6.2f}"
                    f"  p99 {cell['p99_ms'] / other['p99_ms']:6.2f}"
                )
        rt = results["reference_turns"]["reply_in_post"]
        print(
            f"   reference reply in the POST answer: p50 {rt['p50_ms']:.1f} ms, "
            f"p99 {rt['p99_ms']:.1f} ms"
        )


if __name__ == "__main__":
    main()
