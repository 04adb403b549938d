"""Waiting for a conversation's nudges and text deltas without holding a thread."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from poppy_django.fanout import watchdog
from poppy_django.fanout.bus import Inbox, open_inboxes
from poppy_django.fanout.publishing import DELTA, NUDGE, conversation_channel


@dataclass(frozen=True)
class Delta:
    message_id: str
    text: str


class ConversationListener(Inbox):
    """One waiting reader of one conversation in this process."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(conversation_channel(conversation_id))
        self.conversation_id = conversation_id
        #: The conversation's ``last_seq`` as of the reader's latest read (see the watchdog).
        self.seen_seq = 0

    async def wait(self, timeout: float) -> tuple[bool, list[Delta]]:
        """Wait for a nudge or delta: (nudged, deltas received in order).

        Events that may have been dropped (a full queue, a lost subscription, the
        watchdog's wake-up) count as a nudge: the reader re-reads, never misses.
        """
        dropped, items = await self.receive(timeout)
        nudged = dropped or any(item.type == NUDGE for item in items)
        deltas = [
            Delta(message_id=item.data["message_id"], text=item.data["text"])
            for item in items
            if item.type == DELTA
        ]
        return nudged, deltas


def waiting_readers() -> list[ConversationListener]:
    return [inbox for inbox in open_inboxes() if isinstance(inbox, ConversationListener)]


@asynccontextmanager
async def listen(conversation_id: str) -> AsyncIterator[ConversationListener]:
    """Listen to the conversation for the duration of the block."""
    listener = ConversationListener(conversation_id)
    listener.open()
    watchdog.ensure_running(waiting_readers)
    try:
        yield listener
    finally:
        listener.close()
