"""The bounded fallback for lost wake-ups: one query per interval for every waiting reader.

A publish can fail (Redis down, a process killed between commit and publish). Every
``WAKE_FALLBACK_SECONDS`` each process's watchdog reads ``last_seq`` of the conversations it
has readers for (one query per thousand) and wakes the readers that have not read up to it.
Idle readers cost nothing in between, however many there are.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Iterable
from typing import Protocol

from poppy_django.conf import poppy_settings
from poppy_django.models import Conversation
from poppy_django.threads import in_thread

logger = logging.getLogger("poppy_django.fanout")

#: Conversations asked about per watchdog query.
CHUNK = 1000


class Reader(Protocol):
    conversation_id: str
    #: The conversation's ``last_seq`` as of the reader's latest read.
    seen_seq: int

    def poke(self) -> None: ...


_watchdogs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[None]] = (
    weakref.WeakKeyDictionary()
)


def ensure_running(readers: Callable[[], Iterable[Reader]]) -> None:
    """Start this event loop's watchdog over ``readers()`` unless it runs already."""
    loop = asyncio.get_running_loop()
    task = _watchdogs.get(loop)
    if task is None or task.done():
        _watchdogs[loop] = loop.create_task(_watch(readers))


async def _watch(readers: Callable[[], Iterable[Reader]]) -> None:
    while True:
        await asyncio.sleep(poppy_settings.WAKE_FALLBACK_SECONDS)
        waiting = list(readers())
        if not waiting:
            continue
        try:
            latest = await in_thread(last_seqs, sorted({r.conversation_id for r in waiting}))
        except Exception:
            logger.warning("poppy: the wake-up watchdog could not read", exc_info=True)
            continue
        for reader in waiting:
            if latest.get(reader.conversation_id, 0) > reader.seen_seq:
                reader.poke()


def last_seqs(conversation_ids: list[str]) -> dict[str, int]:
    latest: dict[str, int] = {}
    for start in range(0, len(conversation_ids), CHUNK):
        chunk = conversation_ids[start : start + CHUNK]
        latest.update(Conversation.objects.filter(pk__in=chunk).values_list("id", "last_seq"))
    return latest
