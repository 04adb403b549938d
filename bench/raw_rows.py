"""A read's two statements built into model instances: ``RawQuerySet`` against
``StoreBackend.fetch`` (:mod:`poppy_django.store.backends`), in one process, rounds alternated.

    DATABASE_URL=postgres://... DJANGO_DEBUG=0 POPPY_DEV_AUTHORITY=0 \\
    .venv/bin/python bench/raw_rows.py [--rounds 5] [--reads 500] [--events 6]

The database must be migrated; a conversation with ``--events`` company messages is added
to it. Each round times ``--reads`` reads both ways (the conversation's read fields, then the
last four events, as a JSON read after a cursor runs them) and prints CPU ms per read
(``time.process_time()``: the database's own time is not in it). Both ways must build equal
rows first, or the script stops.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.seeded import conversation_with, setup_django  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reads", type=int, default=500)
    parser.add_argument("--events", type=int, default=6)
    args = parser.parse_args()
    setup_django()

    from poppy_django.models import Conversation, Event
    from poppy_django.store import backends, reading

    conversation = conversation_with(args.events)
    store = backends.for_alias("default")
    state_sql = store.sql.conversation_by_id(reading.READ_FIELDS)
    events_sql = store.sql.events_in_range(reading.EVENT_FIELDS)
    events_params = [conversation.pk, max(0, conversation.last_seq - 4), conversation.last_seq, 51]

    def raw_queryset() -> list[Event]:
        list(Conversation.objects.raw(state_sql, [conversation.pk]))
        return list(Event.objects.raw(events_sql, events_params))

    def fetch() -> list[Event]:
        store.fetch(Conversation, state_sql, [conversation.pk])
        return store.fetch(Event, events_sql, events_params)

    expected = [event.to_wire() for event in raw_queryset()]
    if [event.to_wire() for event in fetch()] != expected:
        raise SystemExit("the two ways built different rows")
    ways: list[Callable[[], list[Event]]] = [raw_queryset, fetch]
    print(f"cpu ms per read ({args.reads} reads a round), {os.cpu_count()} cores")
    for round_number in range(1, args.rounds + 1):
        figures = []
        for way in ways:
            started = time.process_time()
            for _ in range(args.reads):
                way()
            figures.append(
                f"{way.__name__} {(time.process_time() - started) / args.reads * 1e3:.3f}"
            )
        print(f"round {round_number}: " + ", ".join(figures))
    conversation.delete()


if __name__ == "__main__":
    main()
