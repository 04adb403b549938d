"""Wake-ups and text deltas across processes, over django-eventstream.

django-eventstream carries the messages: in-process when ``EVENTSTREAM_REDIS`` is unset
(the embedded default), over Redis pub/sub between every web process and worker when it is
set. What it carries is only a nudge ("conversation X has new events") or a text delta: a
woken reader always re-reads the database, so an overflowing or lost nudge loses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django_eventstream import send_event
from django_eventstream.views import Listener, ListenerManager, RedisListener, get_listener_manager

logger = logging.getLogger(__name__)

#: The eventstream type of a nudge and of a text delta on a conversation's channel.
NUDGE = "poppy.nudge"
DELTA = "poppy.delta"
#: The desk's channel: every conversation's changes, for staff browsers.
DESK_CHANNEL = "poppy-desk"


def conversation_channel(conversation_id: str) -> str:
    return f"poppy-{conversation_id}"


def _send(channel: str, event_type: str, data: dict[str, Any]) -> None:
    try:
        send_event(channel, event_type, data)
    except Exception:
        # A lost nudge is recovered by the readers' fallback re-read; never fail a write.
        logger.warning("poppy: could not publish %s on %s", event_type, channel, exc_info=True)


def nudge_on_commit(conversation_id: str, last_seq: int, summary: dict[str, Any]) -> None:
    """After the surrounding transaction commits, wake the conversation's readers and the desk."""

    def publish() -> None:
        _send(conversation_channel(conversation_id), NUDGE, {"seq": last_seq})
        _send(DESK_CHANNEL, NUDGE, {"conversation_id": conversation_id, "seq": last_seq, **summary})

    transaction.on_commit(publish)


def publish_delta(conversation_id: str, message_id: str, text: str) -> None:
    """Relay a piece of a reply being written; it is never stored."""
    _send(
        conversation_channel(conversation_id),
        DELTA,
        {"message_id": message_id, "text": text},
    )


@dataclass(frozen=True)
class Delta:
    message_id: str
    text: str


class ConversationListener(Listener):
    """A django-eventstream listener on one channel, awaited instead of queued to a client."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__()
        self.conversation_id = conversation_id
        self.channels = {conversation_channel(conversation_id)}
        self.user_id = "poppy"
        self.overflow: bool = False
        #: The conversation's ``last_seq`` as of the reader's latest read (see the watchdog).
        self.seen_seq = 0

    async def wait(self, timeout: float) -> tuple[bool, list[Delta]]:
        """Wait for a nudge or delta: (nudged, deltas received in order)."""
        if not self.channel_items:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.aevent.wait(), timeout)
        self.aevent.clear()
        nudged, deltas = self.overflow, []
        self.overflow = False
        for item in self.channel_items.pop(next(iter(self.channels)), []):
            if item.type == NUDGE:
                nudged = True
            elif item.type == DELTA:
                data = item.data if isinstance(item.data, dict) else json.loads(item.data)
                deltas.append(Delta(message_id=data["message_id"], text=data["text"]))
        self.channel_items.clear()
        # An overflowed queue may have dropped nudges: treat it as one (re-read, never drop).
        return nudged, deltas


_subscribers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[None]] = (
    weakref.WeakKeyDictionary()
)
#: Reconnection backoff of the Redis subscription, in seconds.
_RETRY_FIRST, _RETRY_MAX = 0.5, 5.0


def _supervise_redis(manager: ListenerManager) -> None:
    """Keep this loop's Redis subscription alive across Redis restarts.

    django-eventstream starts its subscriber once and never again if Redis drops it; this
    runs it instead, reconnects with backoff, and after each reconnection wakes every local
    listener to re-read the database, since nudges published meanwhile were lost.
    """
    if manager.redis_listener is None:
        return
    loop = asyncio.get_running_loop()
    task = _subscribers.get(loop)
    if task is not None and not task.done():
        return
    manager.redis_listener_started = True  # ours to run, not add_listener()'s
    _subscribers[loop] = loop.create_task(_subscribe_forever(manager))


async def _subscribe_forever(manager: ListenerManager) -> None:
    delay = _RETRY_FIRST
    while True:
        started = time.monotonic()
        try:
            await manager.redis_listener.listen()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.warning("poppy: Redis subscription lost; reconnecting", exc_info=True)
        delay = _RETRY_FIRST if time.monotonic() - started > 10 * _RETRY_MAX else delay
        await asyncio.sleep(delay)
        delay = min(delay * 2, _RETRY_MAX)
        manager.redis_listener = RedisListener()
        _wake_everyone(manager)


def _wake_everyone(manager: ListenerManager) -> None:
    with manager.lock:
        listeners = {item for group in manager.listeners_by_channel.values() for item in group}
    for listener in listeners:
        listener.overflow = True
        listener.wake_threadsafe()


_watchdogs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[None]] = (
    weakref.WeakKeyDictionary()
)
#: Conversations asked about per watchdog query.
_WATCH_CHUNK = 1000


def _ensure_watchdog(manager: ListenerManager) -> None:
    loop = asyncio.get_running_loop()
    task = _watchdogs.get(loop)
    if task is None or task.done():
        _watchdogs[loop] = loop.create_task(_watch(manager))


async def _watch(manager: ListenerManager) -> None:
    """The bounded fallback for lost nudges: one query per interval for every reader.

    Every ``WAKE_FALLBACK_SECONDS`` it reads ``last_seq`` of the conversations this process
    has readers for (one query per thousand) and wakes the readers that have not read up to
    it. Idle readers cost nothing in between, however many there are.
    """
    from poppy_django.conf import poppy_settings
    from poppy_django.reading import in_thread

    while True:
        await asyncio.sleep(poppy_settings.WAKE_FALLBACK_SECONDS)
        with manager.lock:
            readers = [
                listener
                for group in manager.listeners_by_channel.values()
                for listener in group
                if isinstance(listener, ConversationListener)
            ]
        if not readers:
            continue
        try:
            latest = await in_thread(_last_seqs, sorted({r.conversation_id for r in readers}))
        except Exception:
            logger.warning("poppy: the wake-up watchdog could not read", exc_info=True)
            continue
        for reader in readers:
            if latest.get(reader.conversation_id, 0) > reader.seen_seq:
                reader.overflow = True
                reader.wake_threadsafe()


def _last_seqs(conversation_ids: list[str]) -> dict[str, int]:
    from poppy_django.models import Conversation

    latest: dict[str, int] = {}
    for start in range(0, len(conversation_ids), _WATCH_CHUNK):
        chunk = conversation_ids[start : start + _WATCH_CHUNK]
        latest.update(Conversation.objects.filter(pk__in=chunk).values_list("id", "last_seq"))
    return latest


@asynccontextmanager
async def listen(conversation_id: str) -> AsyncIterator[ConversationListener]:
    """Register a listener for the conversation for the duration of the block."""
    listener = ConversationListener(conversation_id)
    listener.assign_loop()
    manager = get_listener_manager()
    _supervise_redis(manager)
    _ensure_watchdog(manager)
    manager.add_listener(listener)
    try:
        yield listener
    finally:
        manager.remove_listener(listener)
