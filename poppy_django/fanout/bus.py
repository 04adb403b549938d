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

A message may carry its key's **version** (a conversation's newest ``last_seq``, first,
and ``pruned_before_seq``): it is set with the publish, in the same command on Redis (a key
per conversation, kept :data:`VERSION_SECONDS`), so that any process can ask what the
newest version is (:func:`current_version`) and tell whether what it heard (:func:`watch`:
every message this process receives, whoever waits for it) is all there is. A process that
read a key's state from the database says its version where none is set
(:func:`offer_version`: a write's own always wins), and a pruning or a deletion marks the
key out of date for :data:`FORGOTTEN_SECONDS` (:func:`forget_version`), longer than any
read that began before it takes to offer what it read. A write's version never replaces a
later write's (:mod:`.version_order`): two writes commit in order, but their publishes may
land in the other order. A versioned publish or an out-of-date mark that fails leaves the
previous version on Redis: the process then trusts no version of the key, and a thread of its
own marks the key out of date on Redis once Redis answers (below, "Versions a failed publish
left behind").
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from opentelemetry import metrics, propagate, trace

from poppy_django.conf import poppy_settings
from poppy_django.fanout import version_order
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
#: How long a key's version is kept after its last write or read from the database, in
#: seconds (then unknown: a reader asks the database, and says what it read). It also bounds
#: how long a write whose process died between its commit and its publish goes unseen.
VERSION_SECONDS = 30
#: How long a key stays "out of date" after a pruning or a deletion, in seconds: no reader
#: may say what it read meanwhile (it may have read before), only a write.
FORGOTTEN_SECONDS = 10
#: The version of a key that is out of date: no process's entry has it.
FORGOTTEN = "-"
#: Versions this process keeps without Redis (one process: the newest writes' keys).
LOCAL_VERSIONS = 65536
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
        if _redis_kwargs():
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


# Namespace --------------------------------------------------------------------------------


def namespace() -> str:
    """This deployment's name on its Redis server: ``<REDIS_PREFIX>:<database number>``."""
    return f"{poppy_settings.REDIS_PREFIX}:{int((_redis_kwargs() or {}).get('db') or 0)}"


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


# Versions ------------------------------------------------------------------------------------

#: Without Redis: each key's newest version and until when it holds (monotonic seconds).
_local_versions: OrderedDict[str, tuple[str, float]] = OrderedDict()
_local_versions_lock = threading.Lock()
#: SET the key's version, unless it holds a later write's, and PUBLISH its message either
#: way: one command, one round trip.
_PUBLISH_VERSIONED = (
    version_order.LUA
    + """
local held, new = rank(redis.call('GET', KEYS[1])), rank(ARGV[1])
if not (held and new and after(held, new)) then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
end
return redis.call('PUBLISH', ARGV[3], ARGV[4])
"""
)


def version_key(key: str) -> str:
    """The Redis key holding ``key``'s newest version."""
    return f"{namespace()}:version:{key}"


def _set_local_version(key: str, version: str, seconds: float, *, if_unset: bool) -> None:
    """Keep ``version`` of ``key`` here, unless the one held (unexpired) stays: any, with
    ``if_unset``; else a later write's."""
    now = time.monotonic()
    with _local_versions_lock:
        held = _local_versions.get(key)
        if (
            held is not None
            and held[1] > now
            and (if_unset or version_order.after(held[0], version))
        ):
            return
        _local_versions[key] = (version, now + seconds)
        _local_versions.move_to_end(key)
        if len(_local_versions) > LOCAL_VERSIONS:
            _local_versions.popitem(last=False)


def forget_version(key: str) -> None:
    """``key`` is out of date (its conversation was pruned or deleted, or changed hands):
    readers ask the database until its next write; may raise (then this process trusts no
    version of ``key`` at once, and its thread marks it out of date once Redis answers)."""
    if _redis_kwargs():
        try:
            _publisher().set(version_key(key), FORGOTTEN, ex=FORGOTTEN_SECONDS)
        except Exception:
            _not_set(key, None)
            raise
    else:
        _set_local_version(key, FORGOTTEN, FORGOTTEN_SECONDS, if_unset=False)


def offer_version(key: str, version: str) -> None:
    """``key``'s version as a read from the database found it, kept where none is set (a
    write's, or an out-of-date mark, stays); may raise."""
    if _redis_kwargs():
        _publisher().set(version_key(key), version, ex=VERSION_SECONDS, nx=True)
    else:
        _set_local_version(key, version, VERSION_SECONDS, if_unset=True)


_readers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, redis.asyncio.Redis] = (
    weakref.WeakKeyDictionary()
)


async def current_version(key: str) -> str | None:
    """``key``'s newest version as its last write set it (None: unknown), without blocking
    the event loop: one ``GET`` on this loop's Redis client, or this process's map."""
    kwargs = _redis_kwargs()
    if not kwargs:
        with _local_versions_lock:
            held = _local_versions.get(key)
        return held[0] if held is not None and held[1] > time.monotonic() else None
    if (_unsure or _unsure_all_until) and _is_unsure(key):
        return None
    loop = asyncio.get_running_loop()
    client = _readers.get(loop)
    if client is None:
        client = _readers[loop] = redis.asyncio.Redis(**kwargs)
    found = await client.get(version_key(key))
    return found.decode() if isinstance(found, bytes) else found


# Versions a failed publish left behind ---------------------------------------------------------
# A write whose versioned publish failed (a Redis error or timeout at that moment, or this
# process cut off from Redis) left its key's previous version on Redis, which every process's
# tail would go on trusting, without the write, until it expired; a pruning, a deletion or an
# account's binding whose out-of-date mark failed (:func:`forget_version`) left it trusted with
# what they changed. This process trusts no version of the key at once; its "poppy-versions"
# thread then marks the key out of date on Redis (:data:`FORGOTTEN`) as soon as Redis answers:
# after a failed publish, unless a version at least as new as the write's is there already
# (or a mark); after a failed mark, whatever is there, since a publish that lands later may
# still be from a write committed before the pruning. Out of date, not the write's own
# version: a newer write of another process may have failed too, and its readers must not
# trust this one's either; an out-of-date mark only ever sends reads to the database, and the
# next write's own version replaces it.


@dataclass(frozen=True)
class _Unsure:
    """A key whose version this process could not set on Redis: the version its failed
    publish carried (None: its out-of-date mark failed), its Redis key, and until when
    (monotonic seconds) it is retried — by then the version the failure left on Redis has
    expired by itself (:data:`VERSION_SECONDS`)."""

    failed: str | None
    redis_key: str
    until: float


#: Keys this process trusts no version of, oldest first.
_unsure: OrderedDict[str, _Unsure] = OrderedDict()
#: Keys :data:`_unsure` holds at most; past it, the oldest is dropped and this process trusts
#: no version of any key until that one's retry would have ended (:data:`_unsure_all_until`).
UNSURE_KEYS = 65536
#: Keys marked out of date on Redis in one round trip.
MEND_BATCH = 500
_unsure_all_until = 0.0
_unsure_lock = threading.Lock()
_mender: threading.Thread | None = None
#: The pause before each round of the thread (a test's may hold it).
mending_backoff: Callable[[], Backoff] = Backoff
#: Mark KEYS[1] out of date (ARGV[2], for ARGV[3] s) unless it holds nothing a tail trusts
#: (an out-of-date mark) or a version at least as new as the failed one, ARGV[1] (unranked:
#: none is).
_FORGET_IF_OLDER = (
    version_order.LUA
    + """
local held = redis.call('GET', KEYS[1])
if held then
  local kept, failed = rank(held), rank(ARGV[1])
  if kept == nil or (failed and not after(failed, kept)) then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
return 1
"""
)


def _is_unsure(key: str) -> bool:
    """Whether this process trusts no version of ``key`` now (its publish or mark failed
    here)."""
    global _unsure_all_until
    with _unsure_lock:
        if _unsure_all_until and time.monotonic() >= _unsure_all_until:
            _unsure_all_until = 0.0
        return key in _unsure or bool(_unsure_all_until)


def _covering(one: str | None, other: str | None) -> str | None:
    """Of two failures of one key, the one whose retry stands for both: a failed mark's
    (None) for any; else the failed version a retry gives way to least (unranked, or the
    later write's)."""
    if one is None or other is None:
        return None
    if version_order.rank(one) is None or version_order.after(one, other):
        return one
    return other


def _not_set(key: str, failed: str | None) -> None:
    """Trust no version of ``key`` here from now on, and have the thread mark it out of date
    on Redis (``failed``: the failed publish's version; None: the failed mark); never
    blocks."""
    global _mender, _unsure_all_until
    with _unsure_lock:
        held = _unsure.pop(key, None)  # one retry stands for both failures
        if held is not None:
            failed = _covering(held.failed, failed)
        _unsure[key] = _Unsure(failed, version_key(key), time.monotonic() + VERSION_SECONDS)
        if len(_unsure) > UNSURE_KEYS:
            _, dropped = _unsure.popitem(last=False)
            if not _unsure_all_until:
                logger.warning("poppy: too many failed versions to retry; reads ask the database")
            _unsure_all_until = max(_unsure_all_until, dropped.until)
        if _mender is None or not _mender.is_alive():
            _mender = threading.Thread(target=_mend, name="poppy-versions", daemon=True)
            _mender.start()


def _published(key: str, version: str) -> None:
    """``version`` of ``key`` is set on Redis (or a later write's is there): a retry for an
    older write's failed publish is no longer needed. A failed mark's still is: this publish
    may be of a write committed before the pruning."""
    with _unsure_lock:
        held = _unsure.get(key)
        if held is None or held.failed is None:
            return
        if not version_order.after(held.failed, version):
            del _unsure[key]


def _mend() -> None:
    """The thread: mark every key whose publish or mark failed out of date on Redis, in
    rounds, with a pause before the first and after each failed one; it ends when none is
    left."""
    global _mender
    backoff = mending_backoff()
    pause = backoff.after(0.0)
    while True:
        time.sleep(pause)
        now = time.monotonic()
        with _unsure_lock:
            while _unsure and next(iter(_unsure.values())).until <= now:
                _unsure.popitem(last=False)  # its old version has expired from Redis by now
            due = list(itertools.islice(_unsure.items(), MEND_BATCH))
            if not due or not _redis_kwargs():
                _mender = None
                return
            client = _publisher()
        try:
            _mark_out_of_date(client, [unsure for _, unsure in due])
        except Exception:
            logger.debug("poppy: could not mark versions out of date yet", exc_info=True)
            pause = backoff.after(0.0)
            continue
        with _unsure_lock:
            for key, unsure in due:
                if _unsure.get(key) is unsure:  # not replaced by a newer failure
                    del _unsure[key]
        backoff, pause = mending_backoff(), 0.0


def _mark_out_of_date(client: redis.Redis, due: list[_Unsure]) -> None:
    """Each key out of date on Redis (a failed publish's: :data:`_FORGET_IF_OLDER`), in one
    round trip; may raise."""
    script = client.register_script(_FORGET_IF_OLDER)
    with client.pipeline(transaction=False) as pipe:
        for unsure in due:
            if unsure.failed is None:
                pipe.set(unsure.redis_key, FORGOTTEN, ex=FORGOTTEN_SECONDS)
            else:
                args = (unsure.failed, FORGOTTEN, FORGOTTEN_SECONDS)
                script(keys=[unsure.redis_key], args=args, client=pipe)
        pipe.execute()


# Publishing -------------------------------------------------------------------------------


def publish(
    key: str, message_type: str, data: dict[str, Any], *, version: str | None = None
) -> None:
    """Deliver a message to every waiting reader of ``key``, in any process, and set
    ``key``'s newest version to ``version`` with it (when given); may raise."""
    writer = _traceparent()
    if _redis_kwargs():
        message = {"key": key, "type": message_type, "data": data, "at": time.time()}
        if writer is not None:
            message["tp"] = writer
        if version is None:
            _publisher().publish(redis_channel(), json.dumps(message))
            return
        try:
            _publisher_script()(
                keys=[version_key(key)],
                args=[version, VERSION_SECONDS, redis_channel(), json.dumps(message)],
            )
        except Exception:
            _not_set(key, version)
            raise
        if _unsure:
            _published(key, version)
        return
    item = Item(message_type, data, writer)
    if version is not None:
        _set_local_version(key, version, VERSION_SECONDS, if_unset=False)
    _tell_watchers(key, item)
    for inbox in _inboxes_of(key):
        inbox._call_soon(inbox._deliver, item)


def publish_many(items: Sequence[tuple[str, str, dict[str, Any]]]) -> None:
    """:func:`publish` for each ``(key, type, data)``, in order, as ONE message on Redis (a
    tick's text deltas of every conversation: one ``PUBLISH`` instead of one per piece)."""
    if len(items) == 1 or not _redis_kwargs():
        for key, message_type, data in items:
            publish(key, message_type, data)
        return
    batch = [{"key": key, "type": message_type, "data": data} for key, message_type, data in items]
    _publisher().publish(redis_channel(), json.dumps({"batch": batch, "at": time.time()}))


def over_redis() -> bool:
    """Whether the bus runs over Redis (``EVENTSTREAM_REDIS``), not within this process."""
    return bool(_redis_kwargs())


def _redis_kwargs() -> dict[str, Any] | None:
    """redis-py's connection arguments for the fan-out, shared with django-eventstream."""
    return getattr(settings, "EVENTSTREAM_REDIS", None) or None


_publisher_client: redis.Redis | None = None
_publisher_versioned: Any = None
_publisher_lock = threading.Lock()


def _publisher() -> redis.Redis:
    """The process's client for publishing (redis-py clients are thread-safe)."""
    global _publisher_client
    client = _publisher_client
    if client is None:
        with _publisher_lock:
            if _publisher_client is None:
                _publisher_client = redis.Redis(**(_redis_kwargs() or {}))
            client = _publisher_client
    return client


def _publisher_script() -> Any:
    """:data:`_PUBLISH_VERSIONED` on the publisher's client (redis-py's ``register_script``:
    ``EVALSHA``, loading the script once where the server lacks it)."""
    global _publisher_versioned
    client = _publisher()
    script = _publisher_versioned
    if script is None or script.registered_client is not client:
        script = _publisher_versioned = client.register_script(_PUBLISH_VERSIONED)
    return script


@receiver(setting_changed)
def _forget_publisher_on_change(*, setting: str, **kwargs: Any) -> None:
    global _publisher_client, _publisher_versioned, _unsure_all_until
    if setting == "EVENTSTREAM_REDIS":
        with _publisher_lock:
            _publisher_client = None
            _publisher_versioned = None
        _readers.clear()
    if setting in ("EVENTSTREAM_REDIS", "POPPY"):  # another deployment's keys
        with _local_versions_lock:
            _local_versions.clear()
        with _unsure_lock:
            _unsure.clear()
            _unsure_all_until = 0.0


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
    kwargs = {**(_redis_kwargs() or {}), "health_check_interval": HEALTH_CHECK_SECONDS}
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
