"""CPU per turn of one worker process: N LLM-shaped turns at once, the worker measured alone.

    .venv/bin/python bench/turn_cpu.py [--n 50] [--tokens 50] [--rate 50] [--ttft 0.5] \
        [--pool prefork --concurrency 1] [--profile var/bench/turn_cpu.txt] [--scripted]

Production mode on loopback, started by the multiprocess tests' launcher
(``tests/multiprocess/cluster.py``): a private PostgreSQL database and redis-server, one
uvicorn process (the fake verifier: no DPoP, the web process is not what is measured), ONE
Celery worker process and the LLM-shaped local model (``bench/llm_endpoint.py``: ``--tokens``
text deltas a turn, at ``--rate`` tokens/s after ``--ttft`` s; with ``--scripted``, the
example project's own scripted model instead, and those three do not apply). After a warm-up, N
conversations are started at once and polled until every reply is in. Printed: the worker's
CPU ms per turn (utime + stime of its process tree, from /proc), Redis commands per turn by
name (``INFO commandstats``: ``publish`` is the text deltas and nudges; the web process's
commands count too) and PostgreSQL transactions per turn (``pg_stat_database``: every
process's, the web process's reads and this script's polling included). ``--profile``:
py-spy (``--gil``: samples that hold the GIL, i.e. Python CPU) records the worker and its
children during the last batch; a summary by layer is written there and py-spy's raw stacks
beside it (``.raw``). py-spy must be on PATH or given by ``--py-spy``.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import psycopg
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.agents import PersonalAgent, company_messages  # noqa: E402
from tests.multiprocess.cluster import BENCH_ENV, PG_ADMIN, Cluster, cpu_seconds  # noqa: E402

#: Layers of a sampled stack, the first that matches wins (order matters).
LAYERS = [
    ("delta publishing (fan-out + desk send_event)", ("publish_delta", "fanout/publishing")),
    ("heartbeat", ("Heartbeat", "renew_leases")),
    ("celery / kombu / billiard", ("celery/", "kombu/", "billiard/", "vine/")),
    ("ORM and database (claims, commits, reads)", ("django/db", "psycopg", "poppy_django/turns")),
    (
        "model stream (pydantic-ai, openai, httpx)",
        ("pydantic_ai", "openai/", "httpx", "httpcore", "h11", "anyio", "pydantic/"),
    ),
    ("our turn code (runtime, relay)", ("poppy_django",)),
    ("asyncio loop itself", ("asyncio/",)),
]


def summarise(raw: Path, turns: int) -> str:
    """py-spy's raw (collapsed) stacks by layer, and the heaviest leaf functions."""
    layers: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        layer = next(
            (name for name, marks in LAYERS if any(mark in stack for mark in marks)), "other"
        )
        layers[layer] += count
        leaves[stack.split(";")[-1]] += count
    lines = [f"{total} samples (GIL held) over {turns} turns"]
    for name, count in layers.most_common():
        lines.append(f"  {100 * count / total:5.1f} %  {name}")
    lines.append("heaviest leaves:")
    for name, count in leaves.most_common(25):
        lines.append(f"  {100 * count / total:5.1f} %  {name}")
    return "\n".join(lines)


def counters(cluster: Cluster) -> dict[str, int]:
    """Redis commands by name and the database's committed transactions, so far."""
    client = redis.Redis(port=cluster.redis_port)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    found = {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        (commits,) = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (cluster.name,)
        ).fetchone()  # type: ignore[misc]
    found["pg_transactions"] = int(commits)
    return found


def run_batch(web: str, n: int, text: str, timeout: float = 300) -> float:
    """Start n conversations at once; seconds until every reply is in."""
    agents = [PersonalAgent().at(web) for _ in range(n)]
    ids: list[str] = [""] * n
    started = time.monotonic()

    def start(index: int) -> None:
        response = agents[index].post("", agents[index].message(text))
        response.raise_for_status()
        ids[index] = response.json()["conversation_id"]

    threads = [threading.Thread(target=start, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    waiting = set(range(n))
    deadline = time.monotonic() + timeout
    while waiting and time.monotonic() < deadline:
        for index in list(waiting):
            if company_messages(agents[index].all_events(ids[index])):
                waiting.discard(index)
        time.sleep(0.2)
    if waiting:
        raise RuntimeError(f"{len(waiting)} replies missing after {timeout} s")
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50, help="conversations at once")
    parser.add_argument("--tokens", type=int, default=50, help="text deltas a turn")
    parser.add_argument("--rate", type=float, default=50.0, help="tokens per second")
    parser.add_argument("--ttft", type=float, default=0.5, help="seconds to first token")
    parser.add_argument("--pool", default="prefork")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=2, help="measured batches")
    parser.add_argument("--profile", type=Path, help="write a py-spy summary here")
    parser.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy")
    parser.add_argument(
        "--scripted",
        action="store_true",
        help="the example project's scripted model instead of the LLM-shaped one",
    )
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="poppy-turn-cpu-"))
    cluster = Cluster(tmp, env={**BENCH_ENV, "POPPY_TURN_TIMEOUT_SECONDS": "120"})
    try:
        cluster.create()
        if not args.scripted:
            cluster.llm(ttft=args.ttft, tokens=args.tokens, rate=args.rate)
        web = cluster.web("web")
        cluster.worker(
            "worker", options=[f"--pool={args.pool}", f"--concurrency={args.concurrency}"]
        )
        run_batch(web, 4, "warm up #ttft=0 #tokens=2")
        worker = cluster.pid("worker")
        per_turn: list[float] = []
        for batch in range(args.repeat):
            before_cpu, before = cpu_seconds(worker), counters(cluster)
            spy = None
            if args.profile and batch == args.repeat - 1:
                raw = tmp / "spy.txt"
                spy = subprocess.Popen(
                    [
                        *[args.py_spy, "record", "-p", str(worker), "--subprocesses", "--gil"],
                        *["--nonblocking", "-r", "200", "-f", "raw", "-o", str(raw)],
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                time.sleep(1)
            wall = run_batch(web, args.n, "hello, a question for you")
            after_cpu, after = cpu_seconds(worker), counters(cluster)
            if spy is not None:
                spy.send_signal(2)
                spy.wait(timeout=60)
                summary = summarise(raw, args.n)
                args.profile.parent.mkdir(parents=True, exist_ok=True)
                args.profile.write_text(summary + "\n")
                shutil.copy(raw, args.profile.with_suffix(".raw"))
                print(summary)
            ms = 1000 * (after_cpu - before_cpu) / args.n
            per_turn.append(ms)
            calls = {
                name: round((after.get(name, 0) - before.get(name, 0)) / args.n, 2)
                for name in sorted(after)
                if after.get(name, 0) != before.get(name, 0)
            }
            model = "scripted" if args.scripted else f"tokens={args.tokens}"
            print(
                f"N={args.n} {model} wall {wall:.1f} s: worker CPU {ms:.1f} ms/turn;"
                f" per turn {calls}",
                flush=True,
            )
        print(f"worker CPU ms/turn: {', '.join(f'{ms:.1f}' for ms in per_turn)}")
    finally:
        cluster.destroy()
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
