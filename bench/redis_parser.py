"""CPU per Redis round trip with redis-py's reply parsers: hiredis's (the production extra's)
and redis-py's own pure-Python one (issue 54).

    .venv/bin/python bench/redis_parser.py [--url redis://127.0.0.1:6379/15] [--calls 5000] \\
        [--rounds 6]

A message costs about ten Redis round trips in all (the POST's proof, rate count and nudge,
the dispatch; the worker's broker reads, nudges and reply pieces), and every web process
parses every published nudge: what parsing a reply costs is paid on each. Per round, each
parser runs the same calls on its own connection, the order swapped every round: an
``INCR`` (a one-integer reply, as the rate count's and the proof's) and a ``GET`` of a
1 KiB value (as a nudge's size). Printed: CPU µs per call (``time.process_time``) per
parser, the medians, and pure-Python / hiredis.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import redis
from redis._parsers import _HiredisParser, _RESP3Parser
from redis.utils import HIREDIS_AVAILABLE


def per_call(client: redis.Redis, command: str, calls: int) -> float:
    """CPU µs per call of ``command`` on the key set up for it."""
    call = (
        (lambda: client.incr("bench:parser:n"))
        if command == "incr"
        else (lambda: client.get("bench:parser:kib"))
    )
    for _ in range(calls // 10):
        call()
    started = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--url", default=os.environ.get("POPPY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    )
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    if not HIREDIS_AVAILABLE:
        raise SystemExit("hiredis is not installed: pip install -e '.[production]'")
    clients = {
        name: redis.Redis.from_url(args.url, protocol=3, parser_class=parser_class)
        for name, parser_class in (("hiredis", _HiredisParser), ("python", _RESP3Parser))
    }
    clients["hiredis"].set("bench:parser:kib", "x" * 1024)
    figures: dict[tuple[str, str], list[float]] = {}
    for number in range(args.rounds):
        order = list(clients) if number % 2 == 0 else list(reversed(clients))
        for command in ("incr", "get"):
            for name in order:
                figures.setdefault((name, command), []).append(
                    per_call(clients[name], command, args.calls)
                )
    clients["hiredis"].delete("bench:parser:n", "bench:parser:kib")
    print(f"CPU µs per round trip, median of {args.rounds} rounds of {args.calls} calls:")
    for command in ("incr", "get"):
        hiredis, python = (statistics.median(figures[(n, command)]) for n in ("hiredis", "python"))
        print(
            f"  {command:5s} hiredis {hiredis:6.1f}  python {python:6.1f}"
            f"  python/hiredis {python / hiredis:.2f}"
        )


if __name__ == "__main__":
    main()
