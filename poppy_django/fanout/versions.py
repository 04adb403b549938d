"""The conversations' versions: which is the newest write of a key, for any process to ask.

A key's **version** (a conversation's newest ``last_seq``, first, and ``pruned_before_seq``)
is set with the publish of its write's message, in the same command on Redis (a key per
conversation, kept :data:`VERSION_SECONDS`; :func:`publish_versioned`, which the bus calls),
so that any process can ask what the newest version is (:func:`current_version`) and tell
whether what it heard (the bus's ``watch``: every message this process receives, whoever
waits for it) is all there is. A process that read a key's state from the database says its
version where none is set (:func:`offer_version`: a write's own always wins), and a pruning
or a deletion marks the key out of date for :data:`FORGOTTEN_SECONDS`
(:func:`forget_version`), longer than any read that began before it takes to offer what it
read. A write's version never replaces a later write's (:mod:`.version_order`): two writes
commit in order, but their publishes may land in the other order. Without
``EVENTSTREAM_REDIS`` (the embedded default) the versions are this process's own.

A versioned publish or an out-of-date mark that fails leaves the previous version on Redis:
the process then trusts no version of the key, and a thread of its own marks the key out of
date on Redis once Redis answers (below, "Versions a failed publish left behind").
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
from django.core.signals import setting_changed
from django.dispatch import receiver

from poppy_django.fanout import version_order
from poppy_django.fanout.redis_clients import namespace, publisher, reader, redis_kwargs
from poppy_django.fanout.retrying import Backoff

logger = logging.getLogger("poppy_django.fanout")

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
_publisher_versioned: Any = None


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


def publish_versioned(key: str, version: str, channel: str, message: dict[str, Any]) -> None:
    """Set ``key``'s version to a write's ``version`` (unless a later write's is there) and
    publish ``message`` (as JSON) on ``channel`` with it: one command on Redis, for the bus;
    may raise (then this process trusts no version of ``key`` at once, and its thread marks
    it out of date once Redis answers)."""
    try:
        _publisher_script()(
            keys=[version_key(key)],
            args=[version, VERSION_SECONDS, channel, json.dumps(message)],
        )
    except Exception:
        _not_set(key, version)
        raise
    if _unsure:
        _published(key, version)


def set_written_version(key: str, version: str) -> None:
    """Without Redis: a write's ``version`` of ``key``, kept here unless a later write's is."""
    _set_local_version(key, version, VERSION_SECONDS, if_unset=False)


def forget_version(key: str) -> None:
    """``key`` is out of date (its conversation was pruned or deleted, or changed hands):
    readers ask the database until its next write; may raise (then this process trusts no
    version of ``key`` at once, and its thread marks it out of date once Redis answers)."""
    if redis_kwargs():
        try:
            publisher().set(version_key(key), FORGOTTEN, ex=FORGOTTEN_SECONDS)
        except Exception:
            _not_set(key, None)
            raise
    else:
        _set_local_version(key, FORGOTTEN, FORGOTTEN_SECONDS, if_unset=False)


def offer_version(key: str, version: str) -> None:
    """``key``'s version as a read from the database found it, kept where none is set (a
    write's, or an out-of-date mark, stays); may raise."""
    if redis_kwargs():
        publisher().set(version_key(key), version, ex=VERSION_SECONDS, nx=True)
    else:
        _set_local_version(key, version, VERSION_SECONDS, if_unset=True)


async def current_version(key: str) -> str | None:
    """``key``'s newest version as its last write set it (None: unknown), without blocking
    the event loop: one ``GET`` on this loop's Redis client, or this process's map."""
    kwargs = redis_kwargs()
    if not kwargs:
        with _local_versions_lock:
            held = _local_versions.get(key)
        return held[0] if held is not None and held[1] > time.monotonic() else None
    if (_unsure or _unsure_all_until) and _is_unsure(key):
        return None
    found = await reader(kwargs).get(version_key(key))
    return found.decode() if isinstance(found, bytes) else found


def _publisher_script() -> Any:
    """:data:`_PUBLISH_VERSIONED` on the publisher's client (redis-py's ``register_script``:
    ``EVALSHA``, loading the script once where the server lacks it)."""
    global _publisher_versioned
    client = publisher()
    script = _publisher_versioned
    if script is None or script.registered_client is not client:
        script = _publisher_versioned = client.register_script(_PUBLISH_VERSIONED)
    return script


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
            if not due or not redis_kwargs():
                _mender = None
                return
            client = publisher()
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


@receiver(setting_changed)
def _forget_versions_on_change(*, setting: str, **kwargs: Any) -> None:
    global _publisher_versioned, _unsure_all_until
    if setting == "EVENTSTREAM_REDIS":
        _publisher_versioned = None
    if setting in ("EVENTSTREAM_REDIS", "POPPY"):  # another deployment's keys
        with _local_versions_lock:
            _local_versions.clear()
        with _unsure_lock:
            _unsure.clear()
            _unsure_all_until = 0.0
