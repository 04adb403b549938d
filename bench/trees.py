"""Two checkouts of poppy-django side by side, their cells alternated (issue 54).

    flock /tmp/poppy-bench.lock .venv/bin/python bench/trees.py --other ../other-checkout \\
        [--rounds 6] [--duration 3] [--warmup 1] [--clients 8]

A change too small for ``bench/peers.py --interleave`` to show (its ratios to the peer move by
10-20 % with the machine's load between runs) is measured against the code before it: this
checkout (A) and ``--other`` (B, e.g. a ``git worktree`` of main) each run the example
project's web process and Celery worker, started as ``bench/peers.py`` starts ours, on one
database and one Redis (B's processes run B's code: their working directory and
``PYTHONPATH`` are B's checkout; B's worker reads a queue of its own). Both trees must have
the same migrations. Each round runs the short read and POST cells of ``bench/peers.py`` on
both, the order swapped every round, so the machine's drift falls on both; printed: B/A per
round and the medians (CPU per request from /proc: the web process's, and for a POST the
worker's until its turns are answered).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import latency, peers  # noqa: E402
from tests.multiprocess import cluster as launcher  # noqa: E402
from tests.multiprocess.cluster import Cluster, cpu_seconds, free_port  # noqa: E402

VERIFIER = "poppy_django.verifier.dpop.verify"


def other_tree(cluster: Cluster, other: Path, port: int) -> tuple[int, int]:
    """The other checkout's worker and web process on this cluster's database and Redis:
    their pids."""
    queue = cluster.env["POPPY_CELERY_QUEUE"] + "-other"
    env = {"PYTHONPATH": str(other), "POPPY_CELERY_QUEUE": queue, "POPPY_AUTHENTICATE": VERIFIER}
    launcher.ROOT = other  # the processes' working directory
    try:
        worker = cluster.worker("celery-other", options=["-Q", queue], env=env).pid
        cluster.web("web-other", port=port, env=env)
    finally:
        launcher.ROOT = ROOT
    return cluster.pid("web-other"), worker


def cell(target: latency.Target, op: str, args: argparse.Namespace) -> dict[str, float]:
    operation = latency.read_events if op == "read" else latency.post_short
    assert target.worker_pid is not None
    worker_before = cpu_seconds(target.worker_pid)
    done = asyncio.run(
        latency.run_cell(target, operation, peers.SIZE, args.clients, args.duration, args.warmup)
    )
    if op == "post":
        latency.wait_idle(target.agents)
    worker = 1000 * (cpu_seconds(target.worker_pid) - worker_before) / done["completed"]
    web = done["server_cpu_ms_per_req"]
    return {
        f"{op}_rps": done["rps"],
        f"{op}_web_ms": web,
        **({"post_worker_ms": worker, "post_cpu_ms": web + worker} if op == "post" else {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--other", type=Path, required=True, help="B: another checkout")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per cell")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--db", default="poppy_bench_trees", help="the database (dropped)")
    parser.add_argument("--out", default=str(ROOT / "var" / "bench" / "trees.json"))
    args = parser.parse_args()
    other = args.other.resolve()
    settings = argparse.Namespace(
        clients=f"1,{args.clients}", server="uvicorn", workers=1, db=args.db
    )
    tmp = Path(tempfile.mkdtemp(prefix="poppy-bench-trees-"))
    port = free_port()
    cluster = latency.launcher(tmp, port, settings)
    cluster.env.pop("POPPY_BENCH_TIMELINE", None)  # the turn latency's; not measured here
    try:
        latency.create_without_discovery_checks(cluster)
        worker = cluster.worker("celery").pid
        latency.setup_django(cluster.env, VERIFIER)
        agents = {
            tree: [latency.dpop_agent(f"{tree}-{n}") for n in range(args.clients)] for tree in "AB"
        }
        latency.seed([*agents["A"], *agents["B"]], [peers.SIZE])
        web = latency.web(cluster, port, VERIFIER)
        other_port = free_port()
        other_web, other_worker = other_tree(cluster, other, other_port)
        public = f"http://127.0.0.1:{port}"  # what both verify proofs against
        a = latency.Target("A", port, public, agents["A"], web, worker)
        b = latency.Target("B", other_port, public, agents["B"], other_web, other_worker)
        rounds: list[dict[str, dict[str, float]]] = []
        for number in range(args.rounds):
            figures: dict[str, dict[str, float]] = {"A": {}, "B": {}}
            for op in ("read", "post"):
                for target in (a, b) if number % 2 == 0 else (b, a):
                    figures[target.name].update(cell(target, op, args))
            rounds.append(figures)
            ratio = {key: round(figures["B"][key] / figures["A"][key], 3) for key in figures["A"]}
            print(f"round {number + 1}: B / A {json.dumps(ratio)}", flush=True)
        print(f"\n==== B ({other}) / A ({ROOT}), {args.clients} clients, {args.rounds} rounds ====")
        for key in rounds[0]["A"]:
            ratios = sorted(r["B"][key] / r["A"][key] for r in rounds)
            medians = [statistics.median(r[tree][key] for r in rounds) for tree in "AB"]
            print(
                f"  {key}: median {statistics.median(ratios):.3f} (min {ratios[0]:.3f}, max "
                f"{ratios[-1]:.3f}); A {medians[0]:.2f}, B {medians[1]:.2f}"
            )
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(rounds))
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
