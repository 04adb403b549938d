"""How many lines an idle worker logs while PostgreSQL is down, minute by minute (issue 50).

    flock /tmp/poppy-bench.lock .venv/bin/python bench/outage_log_lines.py [--minutes 2]
    .venv/bin/python bench/outage_log_lines.py --root /tmp/before   # another checkout

The example project in production mode (tests/multiprocess/cluster.py): one Celery worker
(``prefork -c 2``, no turn to run) on a private PostgreSQL server, which is stopped at once
(``pg_ctl -m immediate``) once the worker is ready. Prints the lines its log grew by in each
minute of the outage. ``--root``: the checkout whose example project runs (to measure a
commit before a change: ``git archive <commit> | tar -x -C /tmp/before``). Results:
docs/logging.md.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.latency import machine  # noqa: E402
from tests import private_postgres  # noqa: E402
from tests.multiprocess import cluster  # noqa: E402


def _kinds(lines: list[str]) -> collections.Counter[str]:
    """Lines by their first 90 characters, digits and timestamps blurred (tracebacks' frame
    lines apart)."""
    return collections.Counter(
        re.sub(r"[0-9]+", "N", line)[24:114] for line in lines if not line.startswith(" ")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=int, default=2)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to run")
    parser.add_argument("--show", action="store_true", help="the most frequent lines")
    args = parser.parse_args()
    print("machine: " + ", ".join(f"{k}={v}" for k, v in machine().items()))
    cluster.ROOT = args.root.resolve()  # the processes run that checkout's example project
    with private_postgres.running() as server, tempfile.TemporaryDirectory() as tmp:
        site = cluster.Cluster(Path(tmp), pg_port=server.port, env={"DJANGO_DEBUG": "0"})
        site.env["PYTHONPATH"] = str(cluster.ROOT)
        site.create()
        try:
            site.worker("worker", options=["--pool=prefork", "--concurrency=2"])
            log = Path(tmp) / "worker.log"
            counted = len(log.read_text().splitlines())
            server.stop()
            for minute in range(1, args.minutes + 1):
                time.sleep(60)
                lines = log.read_text().splitlines()
                print(f"{cluster.ROOT}: minute {minute}: {len(lines) - counted} lines")
                if args.show:
                    for kind, count in _kinds(lines[counted:]).most_common(12):
                        print(f"  {count:4} {kind}")
                counted = len(lines)
        finally:
            server.start()
            site.destroy()


if __name__ == "__main__":
    main()
