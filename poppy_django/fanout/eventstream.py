"""The one module that reaches past django-eventstream's public API.

django-eventstream documents ``send_event`` and its SSE views, but no way for Python code in
a process to receive what is sent. Poppy's waiting readers need exactly that, so this module
registers a listener with django-eventstream's listener manager, drains what the manager
queued for it under the manager's lock (as django-eventstream's own stream view does), and
keeps the manager's Redis subscription alive across Redis restarts (django-eventstream
starts it once and never again).

What it relies on, for the versions pinned in ``pyproject.toml``; the contract test
``tests/stream/test_eventstream_contract.py`` fails loudly when any of it changes:

- ``views.Listener``: ``channels``, ``user_id``, ``channel_items`` (channel -> queued
  events, at most ``views.MAX_PENDING``), ``overflow`` (set when one was dropped),
  ``aevent``, ``assign_loop()``, ``wake_threadsafe()``;
- ``views.get_listener_manager()``: ``add_listener()``, ``remove_listener()``, ``lock``
  (held while it queues), ``redis_listener`` and ``redis_listener_started``;
- ``views.RedisListener()``: ``listen()`` runs the subscription until the connection fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from django_eventstream.views import Listener, ListenerManager, RedisListener, get_listener_manager

logger = logging.getLogger("poppy_django.fanout")

#: Reconnection backoff of the Redis subscription, in seconds.
RETRY_FIRST, RETRY_MAX = 0.5, 5.0


@dataclass(frozen=True)
class Item:
    """One event received on a channel: its eventstream type and decoded data."""

    type: str
    data: Any


class Inbox(Listener):
    """What django-eventstream delivers on one channel to one waiting reader of this process."""

    # Set by Listener.__init__ and by the manager while it queues (under its lock).
    channel_items: dict[str, list[Any]]
    overflow: bool

    def __init__(self, channel: str) -> None:
        super().__init__()
        self.channels = {channel}
        self.user_id = "poppy"

    def open(self) -> None:
        """Start receiving; call on the event loop that will await :meth:`receive`."""
        self.assign_loop()
        manager = get_listener_manager()
        _keep_redis_subscribed(manager)
        with _open_lock:
            _open.add(self)
        manager.add_listener(self)

    def close(self) -> None:
        get_listener_manager().remove_listener(self)
        with _open_lock:
            _open.discard(self)

    async def receive(self, timeout: float) -> tuple[bool, list[Item]]:
        """Wait up to ``timeout`` seconds: (whether events may have been dropped, events)."""
        if not self.channel_items and not self.overflow:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.aevent.wait(), timeout)
        # The manager queues from other threads (in-process sends) under its lock.
        with get_listener_manager().lock:
            self.aevent.clear()
            queued, self.channel_items = self.channel_items, {}
            dropped, self.overflow = self.overflow, False
        items = [
            Item(event.type, json.loads(event.data) if isinstance(event.data, str) else event.data)
            for events in queued.values()
            for event in events
        ]
        return dropped, items

    def poke(self) -> None:
        """Wake the reader from any thread as if events were dropped, so it re-reads."""
        with get_listener_manager().lock:
            self.overflow = True
        self.wake_threadsafe()


_open: set[Inbox] = set()
_open_lock = threading.Lock()


def open_inboxes() -> list[Inbox]:
    """Every inbox of this process that is open now."""
    with _open_lock:
        return list(_open)


_subscriptions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[None]] = (
    weakref.WeakKeyDictionary()
)


def _keep_redis_subscribed(manager: ListenerManager) -> None:
    """Run the manager's Redis subscription on this loop, reconnecting when it fails."""
    if manager.redis_listener is None:
        return  # in-process fan-out: nothing to subscribe to
    loop = asyncio.get_running_loop()
    task = _subscriptions.get(loop)
    if task is not None and not task.done():
        return
    manager.redis_listener_started = True  # ours to run, not add_listener()'s
    _subscriptions[loop] = loop.create_task(_subscribe_forever(manager))


async def _subscribe_forever(manager: ListenerManager) -> None:
    delay = RETRY_FIRST
    while True:
        started = time.monotonic()
        try:
            await manager.redis_listener.listen()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.warning("poppy: Redis subscription lost; reconnecting", exc_info=True)
        delay = RETRY_FIRST if time.monotonic() - started > 10 * RETRY_MAX else delay
        await asyncio.sleep(delay)
        delay = min(delay * 2, RETRY_MAX)
        manager.redis_listener = RedisListener()
        # Whatever was published while the subscription was down is lost: every reader
        # re-reads the database.
        for inbox in open_inboxes():
            inbox.poke()
