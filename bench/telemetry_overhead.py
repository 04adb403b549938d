"""The OpenTelemetry SDK's cost per request, off against on, in alternated rounds.

    DATABASE_URL=postgres://... REDIS_URL=redis://... \\
    .venv/bin/python bench/telemetry_overhead.py [--rounds 8] [--requests 300]
    .venv/bin/python bench/telemetry_overhead.py --turns [--rounds 4] [--n 50]
    .venv/bin/python bench/telemetry_overhead.py --instrumentation [--requests 5000]
    .venv/bin/python bench/telemetry_overhead.py --span-floor --rounds 4 --requests 20000

Each round runs ``bench/request_cost.py`` twice, in fresh processes, in an order that
alternates (off/on, on/off, …) so the machine's drift falls on both: once with no ``OTEL_*``
variable (the API's no-op: what every deployment without an SDK pays), once with the SDK the
example project installs from them (``POPPY["OPENTELEMETRY"]``): spans batched to an OTLP
receiver in this process, metrics written every 5 s for the multiprocess Prometheus path.
Printed: the median CPU ms per request of each operation (a context-only message, a message
that dispatches a turn, a JSON read) with the SDK off and on, and their ratio, as JSON.
Production mode as request_cost.py runs it (DEBUG off, the fake verifier, the example
project's settings); the database must be migrated.

``--turns``: the worker's side of a message instead, ``bench/turn_cpu.py`` (a cluster of its
own: one Celery worker process, ``--n`` LLM-shaped turns at once, two measured batches) off
and on in alternated rounds; printed: the median worker CPU ms per turn off and on.

``--instrumentation``: the part of a read that differs between off and on, alone
(``bench/instrumentation_cost.py``: the request's span, its event and its histogram around a
ready answer, no database), ``--requests`` times a process; printed: the median CPU µs per
read off, on, and ``raw`` (the same span made on the tracer directly: the SDK's own floor).
A whole read's CPU varies by about ±10 % between runs here, more than the 5 % it is asked to
resolve; this part alone varies far less.

``--span-floor``: the SDK's span alone, outside Django, part by part (``bench/span_floor.py``:
not sampled, recorded, batched, encoded, sent over OTLP/HTTP to this process's receiver),
with and without the identity check's event, ``--requests`` times a process; printed: the
median CPU µs per read of each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.span_floor import PARTS  # noqa: E402 - after the path
from tests.otlp_receiver import receiving  # noqa: E402

#: ``--env``: more variables for the SDK-on runs (a sampler, metrics only, …).
EXTRA_ENV: dict[str, str] = {}

BASE_ENV = {
    "DJANGO_DEBUG": "0",
    "POPPY_DEV_AUTHORITY": "0",
    "POPPY_AUTHENTICATE": "poppy_django.verifier.fake.verify",
    "POPPY_ALLOW_FAKE_VERIFIER": "1",
    "POPPY_LOG_LEVEL": "WARNING",
    "POPPY_THROTTLE_RATES": '{"conversation_start": "1000000/s", "message": "1000000/s"}',
}


def sdk_on(endpoint: str, metrics_dir: str) -> dict[str, str]:
    """The variables of an SDK-on run: spans to the receiver at ``endpoint``, metrics into
    ``metrics_dir`` for the multiprocess Prometheus path, and ``--env``'s."""
    return {
        "OTEL_SERVICE_NAME": "bench",
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
        "OTEL_METRICS_EXPORTER": "prometheus_multiprocess",
        "OTEL_METRIC_EXPORT_INTERVAL": "5000",
        "PROMETHEUS_MULTIPROC_DIR": metrics_dir,
        **EXTRA_ENV,
    }


def run(requests: int, env: dict[str, str]) -> dict[str, dict[str, float]]:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "request_cost.py"), "--requests", str(requests)],
        env={**os.environ, **BASE_ENV, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    measured: dict[str, dict[str, float]] = json.loads(result.stdout.strip().splitlines()[-1])
    return measured


def turn_cpu(n: int, env: dict[str, str]) -> list[float]:
    """The worker's CPU ms per turn of each measured batch of bench/turn_cpu.py."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "turn_cpu.py"), "--n", str(n)],
        env={**os.environ, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    line = next(
        line for line in result.stdout.splitlines() if line.startswith("worker CPU ms/turn:")
    )
    return [float(ms) for ms in line.partition(":")[2].split(",")]


def turns(rounds: int, n: int) -> None:
    per_turn: dict[str, list[float]] = {"off": [], "on": []}
    with receiving() as (endpoint, received), tempfile.TemporaryDirectory() as metrics_dir:
        telemetry = sdk_on(endpoint, metrics_dir)
        for round_ in range(rounds):
            for mode in ["off", "on"] if round_ % 2 == 0 else ["on", "off"]:
                per_turn[mode] += turn_cpu(n, telemetry if mode == "on" else {})
            print(f"round {round_ + 1}/{rounds} done", file=sys.stderr, flush=True)
        spans = len(received.snapshot())
    off, on = statistics.median(per_turn["off"]), statistics.median(per_turn["on"])
    print(
        json.dumps(
            {
                "rounds": rounds,
                "n": n,
                "spans": spans,
                "worker_cpu_ms_per_turn": {
                    "off": round(off, 2),
                    "on": round(on, 2),
                    "ratio": round(on / off, 3),
                    "off_all": per_turn["off"],
                    "on_all": per_turn["on"],
                },
            }
        )
    )


def instrumentation(rounds: int, requests: int) -> None:
    per_read: dict[str, list[float]] = {"off": [], "on": [], "raw": []}
    script = ROOT / "bench" / "instrumentation_cost.py"
    with receiving() as (endpoint, received), tempfile.TemporaryDirectory() as metrics_dir:
        telemetry = sdk_on(endpoint, metrics_dir)
        for round_ in range(rounds):
            for mode in ["off", "on", "raw"] if round_ % 2 == 0 else ["raw", "on", "off"]:
                result = subprocess.run(
                    [sys.executable, str(script), "--requests", str(requests)]
                    + (["--raw"] if mode == "raw" else []),
                    env={**os.environ, **BASE_ENV, **(telemetry if mode != "off" else {})},
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    timeout=600,
                    check=True,
                )
                per_read[mode].append(float(result.stdout.strip().splitlines()[-1]))
        spans = len(received.snapshot())
    medians = {mode: round(statistics.median(values), 1) for mode, values in per_read.items()}
    print(
        json.dumps(
            {
                "rounds": rounds,
                "requests": requests,
                "spans": spans,
                "instrumentation_cpu_us_per_read": medians,
                "all": {mode: [round(us, 1) for us in values] for mode, values in per_read.items()},
            }
        )
    )


def span_floor(rounds: int, requests: int) -> None:
    script = ROOT / "bench" / "span_floor.py"
    cases = [(part, event) for part in PARTS for event in (True, False)]
    per_read: dict[str, list[float]] = {}
    with receiving() as (endpoint, _received):
        for round_ in range(rounds):
            for part, event in cases if round_ % 2 == 0 else list(reversed(cases)):
                result = subprocess.run(
                    [sys.executable, str(script), "--part", part, "--requests", str(requests)]
                    + ["--endpoint", endpoint]
                    + ([] if event else ["--no-event"]),
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    timeout=600,
                    check=True,
                )
                name = part if event else f"{part} (no event)"
                per_read.setdefault(name, []).append(float(result.stdout.strip().splitlines()[-1]))
    medians = {name: round(statistics.median(values), 1) for name, values in per_read.items()}
    print(json.dumps({"rounds": rounds, "requests": requests, "span_cpu_us_per_read": medians}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--turns", action="store_true", help="the worker's CPU per turn")
    parser.add_argument("--n", type=int, default=50, help="--turns: turns at once")
    parser.add_argument(
        "--instrumentation", action="store_true", help="a read's instrumentation alone"
    )
    parser.add_argument(
        "--span-floor", action="store_true", help="the SDK's span alone, part by part"
    )
    parser.add_argument(
        "--env",
        default="{}",
        help='JSON of more OTEL_* variables when on: {"OTEL_TRACES_SAMPLER": …}',
    )
    args = parser.parse_args()
    EXTRA_ENV.update(json.loads(args.env))
    if args.turns:
        turns(args.rounds, args.n)
        return
    if args.instrumentation:
        instrumentation(args.rounds, args.requests)
        return
    if args.span_floor:
        span_floor(args.rounds, args.requests)
        return
    cpu: dict[str, dict[str, list[float]]] = {"off": {}, "on": {}}
    with receiving() as (endpoint, received), tempfile.TemporaryDirectory() as metrics_dir:
        telemetry = sdk_on(endpoint, metrics_dir)
        for round_ in range(args.rounds):
            order = ["off", "on"] if round_ % 2 == 0 else ["on", "off"]
            for mode in order:
                measured = run(args.requests, telemetry if mode == "on" else {})
                for op, figures in measured.items():
                    cpu[mode].setdefault(op, []).append(figures["cpu_ms"])
            print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)
        spans = len(received.snapshot())
    medians = {
        op: {
            "off_cpu_ms": round(statistics.median(cpu["off"][op]), 3),
            "on_cpu_ms": round(statistics.median(cpu["on"][op]), 3),
            "ratio": round(statistics.median(cpu["on"][op]) / statistics.median(cpu["off"][op]), 3),
        }
        for op in cpu["off"]
    }
    print(json.dumps({"rounds": args.rounds, "requests": args.requests, "spans": spans, **medians}))


if __name__ == "__main__":
    main()
