"""Issue 28 side by side: the SDK's own Company (memory, PostgreSQL) and poppy-django.

    flock /tmp/poppy-bench.lock .venv/bin/python bench/peers.py [--duration 6] [--turns 100] \\
        [--clients 1,8,32] [--targets memory,postgres,ours] [--workers 1] [--sizes 10] \\
        [--celery-processes 1] [--replicas 1] [--interleave N]

One machine, one process each, the client of ``bench/latency.py`` (raw HTTP/1.1 keep-alive,
a fresh ES256 DPoP proof per request, real Session Tokens):

- ``memory``: ``personal-agent-protocol`` 0.26.0's demo company (Manzanita) on its default
  ``MemoryCompanyStore``, ``company_app(service)`` under uvicorn (``bench/ref_company.py``).
- ``postgres``: the same over ``bench/pg_store.py``, a PostgreSQL ``CompanyStore`` (one
  autocommitted statement per call, passes the SDK's ``check_store``), in database
  ``<--db>_peer`` (dropped at the end). Durable, agent inline. ``--replicas 2``: two
  processes of it over the one store, on one port.
- ``ours``: the example project in production mode (uvicorn ``--workers`` processes + one
  Celery worker, PostgreSQL, Redis, scripted model), started as ``bench/latency.py`` does,
  with the ceiling row: a bare Django async view on the same stack. ``--workers 2
  --celery-processes 2``: two web processes and a Celery worker of two pool processes.

Per target, on short conversations (each client starts one and posts 9 more, then starts
another): POST message and GET events (``?cursor=`` 4 events before the end of a 10-event
conversation) req/s and p50/p99 at each ``--clients``; with ``--sizes 10,1000,10000``, also
GET events and POST message in conversations of 1,000 and 10,000 events (the long rows); the
server's CPU per request from /proc (all its processes; ours adds the Celery worker's,
counted until its queue drained).
Then POST → reply visible, p50/p99 over ``--turns``: ours with a long-poll reader
(``wait=30``) and an SSE stream already open (``bench/latency.py``'s turn latency); the
peers answer inline and never hold a read (their ``wait`` is parsed, not waited on; their
stream sends what is stored and ends), so a peer's reply is visible to the reader that
asks right after the POST's answer: POST then GET, or POST then a stream opened from the
last event.

``--interleave N``: instead, the PostgreSQL peer and ours are started together and measured in
N rounds of the short read and POST cells at the middle client count, their cells alternated
(the order swapped every round): the machine's drift, larger here than most changes, then
falls on both, and the ratios per round and their median are printed. Ours runs there without
the bench's turn timeline (``bench/timeline.py``, which only the turn latency reads: five file
appends a message the peer does not make).

Results: tables on stdout and ``var/bench/peers.json``; published by hand in
``docs/benchmarks.md`` (issue 28).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402

from bench import latency  # noqa: E402
from bench.latency import (  # noqa: E402
    PATH,
    Agent,
    Conversation,
    Http,
    Signer,
    Target,
    auth_headers,
    create_without_discovery_checks,
    pct,
    wait_port,
)
from tests.multiprocess.cluster import PG_ADMIN, SERVERS, cpu_seconds, free_port  # noqa: E402

SIZE = 10


# -- the peers ----------------------------------------------------------------------------


@contextlib.contextmanager
def peer_database(name: str) -> Iterator[str]:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield PG_ADMIN.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@contextlib.contextmanager
def peer(
    name: str,
    python: str,
    tmp: Path,
    users: int,
    postgres: str | None,
    pool_size: int,
    sizes: list[int],
    replicas: int = 1,
) -> Iterator[Target]:
    """The SDK's Company under uvicorn (``bench/ref_company.py``, ``replicas`` processes over
    the one store), its users' credentials."""
    port = free_port()
    creds = tmp / f"{name}-creds.json"
    command = [
        python,
        str(ROOT / "bench" / "ref_company.py"),
        *("--port", str(port), "--users", str(users), "--sizes", ",".join(map(str, sizes))),
        *("--creds", str(creds), "--max-seconds", "3600"),
    ]
    if postgres:
        command += ["--postgres", postgres, "--pool-size", str(pool_size)]
        command += ["--replicas", str(replicas)]
    log = open(tmp / f"{name}.log", "wb")  # noqa: SIM115
    process = subprocess.Popen(command, cwd=tmp, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_port(port, process, f"the {name} peer", timeout=600)
        while not creds.exists():  # a replica may listen before the first wrote them
            if process.poll() is not None:
                raise RuntimeError(f"the {name} peer exited with {process.returncode}")
            time.sleep(0.1)
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
        yield Target(name, port, public, agents, process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def company_reply(events: list[dict[str, Any]]) -> bool:
    return any(
        event.get("type") == "message" and event["message"].get("role") == "company"
        for event in events
    )


async def peer_reply_latency(target: Target, agent: Agent, turns: int) -> dict[str, Any]:
    """POST, then the reader that asks at once: a GET (long-poll) or a stream (SSE)."""
    import httpx

    from poppy_django.client import iter_sse

    conversation = agent.conversations[SIZE]
    messages = f"{PATH}/{conversation.id}/messages"
    events = f"{PATH}/{conversation.id}/events"
    cursor = conversation.cursor
    http = Http(target.port)
    timings: dict[str, list[float]] = {"long_poll_reply": [], "sse_reply": []}
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{target.port}") as client:
            for number in range(2 * turns):
                reader = "long_poll_reply" if number % 2 == 0 else "sse_reply"
                message = {"id": f"t{number}_{secrets.token_hex(6)}", "sender": "agent"}
                body = json.dumps({"message": {**message, "text": "hello"}}).encode()
                started = time.perf_counter()
                status, _ = await http.request(
                    "POST", messages, auth_headers(target, agent, "POST", messages), body
                )
                assert status == 202, status
                seen = False
                if reader == "long_poll_reply":
                    while not seen:
                        status, payload = await http.request(
                            "GET",
                            f"{events}?cursor={cursor}&wait=30",
                            auth_headers(target, agent, "GET", events),
                        )
                        assert status == 200, payload
                        page = json.loads(payload)
                        cursor = page["cursor"]
                        seen = company_reply(page["events"])
                else:
                    while not seen:
                        headers = {
                            **auth_headers(target, agent, "GET", events),
                            "Accept": "text/event-stream",
                            "Last-Event-ID": cursor,
                        }
                        async with client.stream("GET", events, headers=headers) as response:
                            assert response.status_code == 200, await response.aread()
                            block: list[str] = []
                            async for line in response.aiter_lines():
                                block.append(line)
                                if line:
                                    continue
                                for frame in iter_sse(block):
                                    if frame.id is not None:
                                        cursor = frame.id
                                    if frame.event != "text-delta" and company_reply(
                                        [frame.json()]
                                    ):
                                        seen = True
                                block = []
                timings[reader].append(time.perf_counter() - started)
    finally:
        await http.close()
    return {
        name: {"p50_ms": pct(values, 0.5) * 1000, "p99_ms": pct(values, 0.99) * 1000}
        for name, values in timings.items()
    } | {"turns": turns}


# -- the cells ----------------------------------------------------------------------------


async def cells(
    target: Target, args: argparse.Namespace, drain: Any = None, ceiling: bool = False
) -> list[dict[str, Any]]:
    """read and post (short conversations, then the long ones of ``--sizes``) at each client
    count; ours counts the worker's CPU per message until its queue drained (the turns the
    cell's POSTs started)."""
    clients = [int(c) for c in args.clients.split(",")]
    ops: list[tuple[str, latency.Operation, int]] = [
        ("read", latency.read_events, SIZE),
        ("post", latency.post_short, SIZE),
    ]
    for size in sizes_of(args):
        if size != SIZE:
            ops += [("read", latency.read_events, size), ("post", latency.post_message, size)]
    if ceiling:
        ops.insert(0, ("ceil", latency.ceiling, SIZE))
    results = []
    for name, operation, size in ops:
        for count in clients:
            worker_before = cpu_seconds(target.worker_pid) if target.worker_pid else None
            cell = await latency.run_cell(
                target, operation, size, count, args.duration, args.warmup
            )
            if name == "post" and drain is not None:
                await asyncio.to_thread(drain)
            if worker_before is not None and cell["completed"]:
                cell["worker_cpu_ms_per_req"] = (
                    1000 * (cpu_seconds(target.worker_pid) - worker_before) / cell["completed"]  # type: ignore[arg-type]
                )
            cell.update(op=name, target=target.name, size=size)
            results.append(cell)
            latency.print_cells(f"[{target.name}]", [cell])
    return results


def sizes_of(args: argparse.Namespace) -> list[int]:
    """The conversation sizes measured: the short one always, first."""
    return [SIZE, *(n for n in map(int, args.sizes.split(",")) if n != SIZE)]


# -- ours ---------------------------------------------------------------------------------


@contextlib.contextmanager
def our_stack(
    args: argparse.Namespace, tmp: Path, timeline: bool = True
) -> Iterator[tuple[Target, Agent, Any]]:
    """The example project in production mode, seeded: its target, the agent of the turn
    latency, and what waits for the worker's queue to drain. ``timeline``: its processes
    write the turn timeline (``bench/timeline.py``: five file appends a message, which the
    peers do not pay), which only the turn latency reads."""
    clients = [int(c) for c in args.clients.split(",")]
    port = free_port()
    cluster = latency.launcher(tmp, port, args)
    if not timeline:
        cluster.env.pop("POPPY_BENCH_TIMELINE", None)
    try:
        create_without_discovery_checks(cluster)
        pool = ["--pool=prefork", f"--concurrency={args.celery_processes}"]
        worker = cluster.worker("celery", options=pool if args.celery_processes > 1 else ()).pid
        latency.setup_django(cluster.env, "poppy_django.verifier.dpop.verify")
        agents = [latency.dpop_agent(f"peers-{n}") for n in range(max(clients))]
        turn_agent = latency.dpop_agent("peers-turns")
        latency.seed([*agents, turn_agent], sizes_of(args))
        pid = latency.web(cluster, port, "poppy_django.verifier.dpop.verify")
        target = Target("ours", port, f"http://127.0.0.1:{port}", agents, pid, worker)

        def drain() -> None:
            latency.wait_idle(agents)

        yield target, turn_agent, drain
    finally:
        cluster.destroy()


def ours(args: argparse.Namespace, tmp: Path, results: dict[str, Any]) -> None:
    with our_stack(args, tmp) as (target, turn_agent, drain):
        results["ours"] = asyncio.run(cells(target, args, drain, ceiling=True))
        turns = asyncio.run(
            latency.turn_latency(target, turn_agent, SIZE, args.turns, latency.timeline_path(tmp))
        )
        results["ours_turns"] = turns
        print(f"[ours] POST → reply: {json.dumps(turns)}")


# -- interleaved ----------------------------------------------------------------------------


def interleaved(args: argparse.Namespace, tmp: Path, results: dict[str, Any]) -> None:
    """``--interleave N``: the PostgreSQL peer and ours up at once, then N rounds of the short
    read and POST cells at the middle client count, the two targets' cells alternated (the
    order swapped every round), so the machine's drift falls on both; ratios per round."""
    clients = [int(c) for c in args.clients.split(",")]
    middle = clients[1] if len(clients) > 1 else clients[0]
    ops = [("read", latency.read_events), ("post", latency.post_short)]
    rounds: list[dict[str, dict[str, float]]] = []
    with contextlib.ExitStack() as stack:
        dsn = stack.enter_context(peer_database(f"{args.db}_peer"))
        peer_target = stack.enter_context(
            peer(
                "postgres",
                args.peer_python,
                tmp,
                middle + 1,
                dsn,
                args.pool_size,
                [SIZE],
                args.replicas,
            )
        )
        our_target, _, drain = stack.enter_context(our_stack(args, tmp, timeline=False))
        for number in range(args.interleave):
            figures: dict[str, dict[str, float]] = {}
            pair = [peer_target, our_target] if number % 2 == 0 else [our_target, peer_target]
            for op, operation in ops:
                for target in pair:
                    worker_before = cpu_seconds(target.worker_pid) if target.worker_pid else 0.0
                    cell = asyncio.run(
                        latency.run_cell(
                            target, operation, SIZE, middle, args.duration, args.warmup
                        )
                    )
                    if op == "post" and target is our_target:
                        drain()
                    worker = (
                        1000 * (cpu_seconds(target.worker_pid) - worker_before) / cell["completed"]
                        if target.worker_pid and cell["completed"]
                        else 0.0
                    )
                    figures.setdefault(target.name, {})[f"{op}_rps"] = cell["rps"]
                    figures[target.name][f"{op}_cpu_ms"] = cell["server_cpu_ms_per_req"] + worker
            rounds.append(figures)
            ratio = {
                key: figures["ours"][key] / figures["postgres"][key] for key in figures["ours"]
            }
            print(
                f"round {number + 1}: ours / postgres "
                + json.dumps({key: round(value, 2) for key, value in ratio.items()})
            )
    results["interleaved"] = rounds
    print(f"\n==== interleaved, {middle} clients, {args.interleave} rounds: ours / postgres ====")
    for key in rounds[0]["ours"]:
        ratios = sorted(r["ours"][key] / r["postgres"][key] for r in rounds)
        print(
            f"  {key}: median {statistics.median(ratios):.2f} (min {ratios[0]:.2f}, "
            f"max {ratios[-1]:.2f})"
        )


# -- the report ---------------------------------------------------------------------------


def report(results: dict[str, Any], clients: list[int]) -> None:
    names = [name for name in ("memory", "postgres", "ours") if isinstance(results.get(name), list)]
    by = {
        (name, cell["op"], cell["clients"]): cell
        for name in names
        for cell in results[name]
        if cell.get("size", SIZE) == SIZE
    }
    long_cells = {
        (name, cell["op"], cell["size"], cell["clients"]): cell
        for name in names
        for cell in results[name]
        if cell.get("size", SIZE) != SIZE
    }

    def row(label: str, figure: Any) -> None:
        cols = [figure(name) for name in names]
        ratio = ""
        if "ours" in names and "postgres" in names:
            ours_value, peer_value = figure("ours", raw=True), figure("postgres", raw=True)
            if ours_value and peer_value:
                ratio = f"{ours_value / peer_value:.2f}"
        print(f"| {label} | " + " | ".join(cols) + f" | {ratio} |")

    def rps(op: str) -> Any:
        def figure(name: str, raw: bool = False) -> Any:
            values = [by[(name, op, c)]["rps"] for c in clients if (name, op, c) in by]
            if raw:
                return values[1] if len(values) > 1 else (values[0] if values else None)
            return " / ".join(f"{v:.0f}" for v in values)

        return figure

    def cpu(op: str, count: int) -> Any:
        def figure(name: str, raw: bool = False) -> Any:
            cell = by.get((name, op, count))
            if cell is None:
                return None if raw else "-"
            value = cell.get("server_cpu_ms_per_req", 0) + cell.get("worker_cpu_ms_per_req", 0)
            return value if raw else f"{value:.1f} ms"

        return figure

    def reply(kind: str) -> Any:
        def figure(name: str, raw: bool = False) -> Any:
            turns = results.get(f"{name}_turns")
            if not turns:
                return None if raw else "-"
            if raw:
                return turns[kind]["p50_ms"]
            return f"{turns[kind]['p50_ms']:.0f} / {turns[kind]['p99_ms']:.0f} ms"

        return figure

    middle = clients[1] if len(clients) > 1 else clients[0]
    counts = " / ".join(map(str, clients))
    print("\n==== issue 28: side by side ====")
    print("| | " + " | ".join(names) + " | ours / postgres |")
    print("|---" * (len(names) + 2) + "|")
    row(f"POST message req/s, {counts} clients", rps("post"))
    row(f"GET events req/s, {counts} clients", rps("read"))
    if "ours" in names:
        ceil = [by[("ours", "ceil", c)]["rps"] for c in clients if ("ours", "ceil", c) in by]
        print(f"| ceiling (bare Django async view) req/s | {' / '.join(f'{v:.0f}' for v in ceil)}")
    row(f"CPU per read (server), {middle} clients", cpu("read", middle))
    row(f"CPU per message (web + worker), {middle} clients", cpu("post", middle))
    row("POST → reply visible p50 / p99, long-poll", reply("long_poll_reply"))
    row("POST → reply visible p50 / p99, SSE", reply("sse_reply"))
    print("(ratio column: req/s at the middle client count, CPU, and reply p50)")
    for size in sorted({size for _, _, size, _ in long_cells}):
        print(f"\n==== {size:,}-event conversations: req/s at {counts} clients ====")
        print("| | " + " | ".join(names) + " | ours / postgres, ours / memory |")
        print("|---" * (len(names) + 2) + "|")
        for op, label in (("read", "GET events"), ("post", "POST message")):
            values = {
                name: [
                    long_cells[(name, op, size, c)]["rps"]
                    for c in clients
                    if (name, op, size, c) in long_cells
                ]
                for name in names
            }
            ratios = [
                "/".join(f"{o / p:.2f}" for o, p in zip(values["ours"], values[peer]) if p)
                for peer in ("postgres", "memory")
                if "ours" in values and peer in values
            ]
            cols = [" / ".join(f"{v:.0f}" for v in values[name]) for name in names]
            print(f"| {label} | " + " | ".join(cols) + f" | {', '.join(ratios)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=6.0, help="seconds per cell")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--turns", type=int, default=100, help="POST → reply turns per reader")
    parser.add_argument("--targets", default="memory,postgres,ours")
    parser.add_argument("--server", choices=SERVERS, default="uvicorn", help="our ASGI server")
    parser.add_argument("--workers", type=int, default=1, help="our server's web processes")
    parser.add_argument(
        "--celery-processes",
        type=int,
        default=1,
        help="our Celery worker's processes (more than 1: prefork with that concurrency)",
    )
    parser.add_argument("--pool-size", type=int, default=10, help="the PostgreSQL peer's pool")
    parser.add_argument(
        "--replicas", type=int, default=1, help="the PostgreSQL peer's processes over its store"
    )
    parser.add_argument(
        "--peer-python", default=sys.executable, help="a Python with personal-agent-protocol"
    )
    parser.add_argument(
        "--sizes", default=str(SIZE), help="conversation sizes, e.g. 10,1000,10000 (long rows)"
    )
    parser.add_argument(
        "--interleave",
        type=int,
        default=0,
        help="rounds of the short cells, the PostgreSQL peer's and ours alternated",
    )
    parser.add_argument("--db", default="poppy_bench_peers", help="the databases (dropped)")
    parser.add_argument("--out", default=str(ROOT / "var" / "bench" / "peers.json"))
    args = parser.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    targets = args.targets.split(",")

    info = latency.machine()
    info["server"] = f"{args.server} {metadata.version(args.server)}, {args.workers} process(es)"
    info["celery processes"] = args.celery_processes
    info["peer replicas"] = args.replicas
    info["personal-agent-protocol"] = metadata.version("personal-agent-protocol")
    print("machine: " + ", ".join(f"{k}={v}" for k, v in info.items()))
    results: dict[str, Any] = {"machine": info, "args": vars(args), "started": time.time()}
    tmp = Path(tempfile.mkdtemp(prefix="poppy-bench-peers-"))
    try:
        for name in ("memory", "postgres"):
            if name not in targets or args.interleave:
                continue
            with contextlib.ExitStack() as stack:
                dsn = (
                    stack.enter_context(peer_database(f"{args.db}_peer"))
                    if name == "postgres"
                    else None
                )
                target = stack.enter_context(
                    peer(
                        name,
                        args.peer_python,
                        tmp,
                        max(clients) + 1,
                        dsn,
                        args.pool_size,
                        sizes_of(args),
                        args.replicas if name == "postgres" else 1,
                    )
                )
                turn_agent = target.agents[-1]
                target.agents = target.agents[: max(clients)]
                results[name] = asyncio.run(cells(target, args))
                results[f"{name}_turns"] = asyncio.run(
                    peer_reply_latency(target, turn_agent, args.turns)
                )
                print(f"[{name}] POST → reply: {json.dumps(results[f'{name}_turns'])}")
        if args.interleave:
            interleaved(args, tmp, results)
            return
        if "ours" in targets:
            ours(args, tmp, results)
        report(results, clients)
    finally:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=2, default=str))
        print(f"\nwritten: {args.out} (server logs in {tmp})")


if __name__ == "__main__":
    main()
