"""A read's row and page in one statement against two, and a turn's thread window written out
against the ORM's queryset, in one process, rounds alternated.

    DATABASE_URL=postgres://... DJANGO_DEBUG=0 POPPY_DEV_AUTHORITY=0 \\
    .venv/bin/python bench/read_and_window.py [--rounds 5] [--n 500] [--events 6]

The database must be migrated (PostgreSQL: the one-statement read is PostgreSQL's); a
conversation with ``--events`` messages and an agent thread of 40 entries is added to it and
deleted at the end. Each round times ``--n`` calls each way and prints CPU (``process_time``:
the database's own time is not in it) and wall ms per call:

- ``read``: a JSON read after a cursor four events before the end through
  ``reading.page_of``, its row and events read as other databases read them (the row, then
  the events: two statements) and as PostgreSQL reads them (``reading.snapshot``: one);
- ``window``: a turn's thread window, as the ORM built it until 2026-12-04 (the queryset
  below) and as ``memory.window_of`` reads it now (a written-out statement).

Both ways must give equal results first, or the script stops.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.seeded import conversation_with, setup_django  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--events", type=int, default=6)
    args = parser.parse_args()
    setup_django()

    from django.db import connection

    from poppy_django import ids
    from poppy_django.agent import memory
    from poppy_django.conf import poppy_settings
    from poppy_django.models import AgentThread, AgentThreadEntry
    from poppy_django.store import reading

    if connection.vendor != "postgresql":
        raise SystemExit("the one-statement read is PostgreSQL's: set DATABASE_URL")
    conversation = conversation_with(args.events)
    thread = AgentThread.objects.create(conversation=conversation, actor_id="bench-actor")
    memory.append(thread, [{"role": "user", "text": f"entry {n}"} for n in range(40)])
    after = max(0, conversation.last_seq - 4)
    cursor = ids.event_id(conversation.pk, after)

    def two_statements() -> Any:
        return reading.page_of(reading.Snapshot(reading.read_state(conversation.pk)), after, cursor)

    def one_statement() -> Any:
        return reading.page_of(reading.snapshot(conversation.pk, after), after, cursor)

    def orm_queryset() -> list[dict[str, str]]:
        newest = list(
            AgentThreadEntry.objects.filter(
                thread__conversation_id=conversation.pk, thread__actor_id="bench-actor"
            )
            .order_by("-position")
            .values_list("role", "text")[: poppy_settings.THREAD_HISTORY_ENTRIES]
        )
        return [{"role": role, "text": text} for role, text in reversed(newest)]

    def written_out() -> list[dict[str, str]]:
        return memory.window_of(conversation.pk, "bench-actor")

    comparisons: dict[str, list[Callable[[], Any]]] = {
        "read": [two_statements, one_statement],
        "window": [orm_queryset, written_out],
    }
    for name, ways in comparisons.items():
        if ways[0]() != ways[1]():
            raise SystemExit(f"{name}: the two ways gave different results")
    print(f"ms per call, cpu / wall ({args.n} calls a round), {os.cpu_count()} cores")
    for round_number in range(1, args.rounds + 1):
        figures = []
        for ways in comparisons.values():
            for way in ways:
                cpu, wall = time.process_time(), time.perf_counter()
                for _ in range(args.n):
                    way()
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                figures.append(
                    f"{way.__name__} {cpu / args.n * 1e3:.3f} / {wall / args.n * 1e3:.3f}"
                )
        print(f"round {round_number}: " + ", ".join(figures))
    conversation.delete()


if __name__ == "__main__":
    main()
