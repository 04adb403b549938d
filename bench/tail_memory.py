"""What the tail of recent events holds in memory against what it counts (issue 54).

    .venv/bin/python bench/tail_memory.py [--conversations 2000] [--events 10] [--text 200]

Fills a :class:`poppy_django.store.tail.Tail` with ``--conversations`` entries of
``--events`` message events each (``--text`` characters of text), as reads from the
database would leave them, with ``TAIL_MAX_BYTES`` out of the way, and prints what the tail
counts against its bound (event JSON plus a fixed overhead an entry) beside what Python
allocated for it (``tracemalloc``): the ratio is what ``docs/settings.md`` tells an operator
sizing ``TAIL_MAX_BYTES``. Then fills one with the default bound and four times the conversations
that fit, to show the bound holds. No database: the entries are built in memory.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--events", type=int, default=10)
    parser.add_argument("--text", type=int, default=200)
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.test import override_settings

    from poppy_django import ids
    from poppy_django.models import Conversation
    from poppy_django.store import reading
    from poppy_django.store.tail import Tail

    print(f"machine: nproc={os.cpu_count()}, python={platform.python_version()}")

    def fill(tail: Tail, count: int) -> None:
        for _ in range(count):
            conversation_id = ids.new_conversation_id()
            conversation = Conversation(
                id=conversation_id,
                client_id="https://pa.example/client",
                user_id="user-1",
                account_id=None,
                status="idle",
                responder="agent",
                last_seq=args.events,
                pruned_before_seq=0,
            )
            events = [
                {
                    "id": ids.event_id(conversation_id, seq),
                    "type": "message",
                    "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
                    "message": {"id": f"m-{seq}", "role": "user", "text": "x" * args.text},
                }
                for seq in range(1, args.events + 1)
            ]
            page = reading.Page(conversation_id, events, events[-1]["id"], False, "idle", "agent")
            tail.remember(conversation, page)

    base = {"TAIL_MAX_BYTES": 1 << 40, "PAGE_SIZE": 100}
    with override_settings(POPPY=base, EVENTSTREAM_REDIS=None):
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        tail = Tail()
        fill(tail, args.conversations)
        allocated = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        print(
            f"{len(tail)} conversations x {args.events} events of {args.text} characters: "
            f"counted {tail.nbytes / 1e6:.1f} MB, allocated {allocated / 1e6:.1f} MB "
            f"({allocated / tail.nbytes:.2f}x what is counted)"
        )
    bound = 16 * 1024 * 1024
    with override_settings(POPPY={**base, "TAIL_MAX_BYTES": bound}, EVENTSTREAM_REDIS=None):
        tail = Tail()
        per_entry = max(1, tail_entry_bytes(args))
        fill(tail, 4 * bound // per_entry)
        print(
            f"bound {bound / 1e6:.1f} MB, {4 * bound // per_entry} conversations read: "
            f"{len(tail)} held, counted {tail.nbytes / 1e6:.1f} MB"
        )


def tail_entry_bytes(args: argparse.Namespace) -> int:
    """About what one entry counts (its events' JSON and the fixed overhead)."""
    from poppy_django.store.tail import ENTRY_OVERHEAD_BYTES

    return args.events * (args.text + 170) + ENTRY_OVERHEAD_BYTES


if __name__ == "__main__":
    main()
