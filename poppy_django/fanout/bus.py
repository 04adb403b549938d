"""Poppy's own wake-up bus: one Redis pub/sub channel between processes, or this process.

Redis pub/sub ignores the database number (a channel is server-wide), so the channel is
named after the deployment's namespace, ``POPPY["REDIS_PREFIX"]`` and the database number
of ``EVENTSTREAM_REDIS`` (``poppy:6:fanout``): two deployments sharing one Redis server
with different database numbers (or prefixes) never receive each other's wake-ups or text
deltas, nor log about them.

A conversation's nudges and text deltas are published to every process; a process with
waiting readers holds one subscription per event loop and hands each message to that
loop's readers of the conversation. Without ``EVENTSTREAM_REDIS`` (the embedded default) a
message goes straight to this process's readers. Only redis-py's public API is used.

A message can be lost (Redis away, a full inbox, a process killed between commit and
publish); readers then re-read the database: a full inbox says so, every reader of a loop
is poked each time its subscription is (re)confirmed, and the watchdog bounds the rest.

A message may carry its key's **version**, set with the publish, in the same command on
Redis: :mod:`.versions` keeps the conversations' versions, and repairs those a failed
publish or mark left behind. :func:`watch` tells of every message this process receives,
whoever waits for it, so that a process can tell whether what it heard is all there is.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio
from opentelemetry import metrics, propagate, trace

from poppy_django.fanout import versions
from poppy_django.fanout.redis_clients import namespace, publisher, redis_kwargs
from poppy_django.fanout.retrying import Backoff, Failures

logger = logging.getLogger("poppy_django.fanout")

#: From a publish to its receipt by a subscribed process (the OpenTelemetry API directly: the
#: fan-out sits below poppy_django.observe, whose metrics it cannot import).
fanout_lag = metrics.get_meter("poppy_django").create_histogram(
    "poppy.fanout.lag",
    unit="s",
    description="From a wake-up's or text delta's publish to its receipt by a web process",
    explicit_bucket_boundaries_advisory=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
)

#: Messages an inbox holds for its reader before it says some were dropped.
MAX_PENDING = 100
#: How often an idle subscription checks its connection (a PING), in seconds.
HEALTH_CHECK_SECONDS = 10.0


@dataclass(frozen=True)
class Item:
    """One message received for a conversation: its type and data, and the W3C
    ``traceparent`` of the span that published it (a turn's commit), if one was recording."""

    type: str
    data: Any
    writer: str | None = None


class Inbox:
    """What the bus delivers for one key to one waiting reader of this process.

    Everything but :meth:`poke` runs on the event loop the inbox was opened on.
    """

    def __init__(self, key: str) -> None:
        self.key = key
        self._items: list[Item] = []
        self._dropped = False
        self._arrived = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def open(self) -> None:
        """Start receiving; call on the event loop that will await :meth:`receive`."""
        self._loop = asyncio.get_running_loop()
        with _registry_lock:
            _registry.setdefault(self.key, set()).add(self)
        if redis_kwargs():
            _keep_subscribed(self._loop)

    def close(self) -> None:
        with _registry_lock:
            inboxes = _registry.get(self.key)
            if inboxes is not None:
                inboxes.discard(self)
                if not inboxes:
                    del _registry[self.key]

    async def receive(self, timeout: float) -> tuple[bool, list[Item]]:
        """Wait up to ``timeout`` seconds: (whether messages may have been lost, messages)."""
        if not self._items and not self._dropped:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), timeout)
        self._arrived.clear()
        items, self._items = self._items, []
        dropped, self._dropped = self._dropped, False
        _link_writers(items)
        return dropped, items

    def poke(self) -> None:
        """Wake the reader from any thread as if messages were lost, so it re-reads."""
        self._call_soon(self._mark_dropped)

    def _deliver(self, item: Item) -> None:
        if len(self._items) < MAX_PENDING:
            self._items.append(item)
        else:
            self._dropped = True
        self._arrived.set()

    def _mark_dropped(self) -> None:
        self._dropped = True
        self._arrived.set()

    def _call_soon(self, callback: Any, *args: Any) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: no one waits
                loop.call_soon_threadsafe(callback, *args)


_registry: dict[str, set[Inbox]] = {}
_registry_lock = threading.Lock()


def open_inboxes() -> list[Inbox]:
    """Every inbox of this process that is open now."""
    with _registry_lock:
        return [inbox for inboxes in _registry.values() for inbox in inboxes]


def _inboxes_of(key: str) -> list[Inbox]:
    with _registry_lock:
        return list(_registry.get(key, ()))


# The channel ------------------------------------------------------------------------------


def redis_channel() -> str:
    """The pub/sub channel this deployment's processes publish to and subscribe to."""
    return f"{namespace()}:fanout"


# The trace that woke a reader ----------------------------------------------------------------
# The OpenTelemetry API directly: the fan-out sits below poppy_django.observe.


def _traceparent() -> str | None:
    """The publishing span's ``traceparent``, when one is recording (a turn's commit)."""
    if not trace.get_current_span().is_recording():
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")


def _writer(entry: Any) -> str | None:
    writer = entry.get("tp") if isinstance(entry, dict) else None
    return writer if isinstance(writer, str) and len(writer) <= 64 else None


def _link_writers(items: list[Item]) -> None:
    """The reader's span (the read that returns what was written) links to each span that
    published what woke it: a reply's read joins the turn that wrote it."""
    reading = trace.get_current_span()
    if not reading.is_recording():
        return
    for item in items:
        if item.writer is None:
            continue
        context = trace.get_current_span(propagate.extract({"traceparent": item.writer}))
        if context.get_span_context().is_valid:
            reading.add_link(context.get_span_context(), {"poppy.woken_by": item.type})


# Every message this process receives ----------------------------------------------------------

#: Told of every message this process receives, waited for or not (:func:`watch`).
_watchers: list[Callable[[str, Item], None]] = []


def watch(watcher: Callable[[str, Item], None]) -> None:
    """Tell ``watcher`` ``(key, item)`` of every message this process receives from now on:
    with Redis, on the subscriptions its waiting readers hold (none while no reader waits:
    a process pays for the deployment's messages only when it has readers to wake); without,
    in the publishing thread. It must be quick, thread-safe and never raise."""
    if watcher not in _watchers:
        _watchers.append(watcher)


def _tell_watchers(key: str, item: Item) -> None:
    for watcher in _watchers:
        watcher(key, item)


# Publishing -------------------------------------------------------------------------------


def publish(
    key: str, message_type: str, data: dict[str, Any], *, version: str | None = None
) -> None:
    """Deliver a message to every waiting reader of ``key``, in any process, and set
    ``key``'s newest version to ``version`` with it (when given); may raise."""
    writer = _traceparent()
    if redis_kwargs():
        message = {"key": key, "type": message_type, "data": data, "at": time.time()}
        if writer is not None:
            message["tp"] = writer
        if version is None:
            publisher().publish(redis_channel(), json.dumps(message))
            return
        versions.publish_versioned(key, version, redis_channel(), message)
        return
    item = Item(message_type, data, writer)
    if version is not None:
        versions.set_written_version(key, version)
    _tell_watchers(key, item)
    for inbox in _inboxes_of(key):
        inbox._call_soon(inbox._deliver, item)


def publish_many(items: Sequence[tuple[str, str, dict[str, Any]]]) -> None:
    """:func:`publish` for each ``(key, type, data)``, in order, as ONE message on Redis (a
    tick's text deltas of every conversation: one ``PUBLISH`` instead of one per piece)."""
    if len(items) == 1 or not redis_kwargs():
        for key, message_type, data in items:
            publish(key, message_type, data)
        return
    batch = [{"key": key, "type": message_type, "data": data} for key, message_type, data in items]
    publisher().publish(redis_channel(), json.dumps({"batch": batch, "at": time.time()}))


def over_redis() -> bool:
    """Whether the bus runs over Redis (``EVENTSTREAM_REDIS``), not within this process."""
    return bool(redis_kwargs())


# Subscribing ------------------------------------------------------------------------------


_subscriptions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[None]] = (
    weakref.WeakKeyDictionary()
)
#: Each subscription's pause between attempts (a test's counts them and does not wait).
subscription_backoff: Callable[[], Backoff] = Backoff
#: Told of each subscription attempt's outcome (:func:`report_subscription_failures_to`).
_subscription_failures: Failures | None = None
#: Said with the first failure of a streak: why the wake-ups missed meanwhile are no loss.
SUBSCRIPTION_HINT = "waiting readers re-read the database once subscribed again; nothing is lost"


def report_subscription_failures_to(failures: Failures | None) -> None:
    """The subscriptions' lost and refused attempts go to ``failures`` from now on, and their
    confirmations (from the app's ``ready()``, a streak: Redis away is one warning, not two
    per 8 s per event loop); None: a warning for each."""
    global _subscription_failures
    _subscription_failures = failures


def _keep_subscribed(loop: asyncio.AbstractEventLoop) -> None:
    """Run this loop's subscription unless it runs already."""
    task = _subscriptions.get(loop)
    if task is None or task.done():
        _subscriptions[loop] = loop.create_task(_subscribe_forever(loop))


async def _subscribe_forever(loop: asyncio.AbstractEventLoop) -> None:
    """Hold the subscription, starting a new one with backoff whenever it fails."""
    backoff = subscription_backoff()
    while True:
        started = time.monotonic()
        try:
            await _subscribe(loop)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if _subscription_failures is None:
                logger.warning("poppy: Redis subscription lost; reconnecting", exc_info=exc)
            else:
                _subscription_failures.failed(exc, SUBSCRIPTION_HINT)
        await asyncio.sleep(backoff.after(time.monotonic() - started))


async def _subscribe(loop: asyncio.AbstractEventLoop) -> None:
    # A PING when idle keeps a quiet connection open through proxies and finds a closed one.
    kwargs = {**(redis_kwargs() or {}), "health_check_interval": HEALTH_CHECK_SECONDS}
    client = redis.asyncio.Redis(**kwargs)
    try:
        async with client.pubsub() as pubsub:
            await pubsub.subscribe(redis_channel())
            while True:
                message = await pubsub.get_message(timeout=HEALTH_CHECK_SECONDS)
                if message is None:
                    continue
                if message["type"] == "subscribe":
                    # Subscribed (again, after a reconnection): whatever was published
                    # before may be lost, so every reader of this loop re-reads.
                    if _subscription_failures is not None:
                        _subscription_failures.succeeded()
                    for inbox in open_inboxes():
                        if inbox._loop is loop:
                            inbox._mark_dropped()
                elif message["type"] == "message":
                    _hand_over(loop, message["data"])
    finally:
        await client.aclose()


def _hand_over(loop: asyncio.AbstractEventLoop, raw: bytes) -> None:
    """Deliver one published message (or each of a batch, in order) to this loop's readers
    of its key."""
    try:
        message = json.loads(raw)
        batch = message["batch"] if isinstance(message, dict) and "batch" in message else [message]
        items = [
            (entry["key"], Item(entry["type"], entry["data"], _writer(entry))) for entry in batch
        ]
        if not all(isinstance(item.data, dict) for _, item in items):
            raise TypeError(raw)
    except (ValueError, KeyError, TypeError):
        logger.warning("poppy: ignored a malformed fan-out message: %.200r", raw)
        return
    if isinstance(sent := message.get("at"), int | float):
        fanout_lag.record(max(0.0, time.time() - sent))
    for key, item in items:
        _tell_watchers(key, item)
        for inbox in _inboxes_of(key):
            if inbox._loop is loop:
                inbox._deliver(item)
