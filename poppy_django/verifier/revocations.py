"""Every process told of a revocation before the revocation answers.

The session-status cache (:mod:`poppy_django.verifier.sessions`) memoizes answers per process,
so a hot session costs no round trip per request. A sign-out must still take effect at the
next request, on whichever process it lands: the issuer calls
:func:`poppy_django.verifier.sessions.revoked`, which publishes the session ids here and waits
(at most :data:`ACK_SECONDS`) until every subscribed process has dropped them and said so.

With ``EVENTSTREAM_REDIS`` set (the Redis of the fan-out bus), each web process holds one
subscription to :func:`channel` in a daemon thread, started by its first cached status read.
A process memoizes only while that subscription is confirmed; while it is down (Redis away)
it does not memoize, and each request reads the shared cache (down too: asks the
session-status callable), logged. After a reconnection it forgets everything it memoized,
since a revocation may have been missed. Without ``EVENTSTREAM_REDIS`` (one process, the
embedded default) the revocation reaches this process's memo only; a revocation made by
another process (``poppy_token --revoke``) is then bounded by the cache window.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import redis
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from poppy_django.fanout.redis_clients import namespace
from poppy_django.fanout.retrying import Backoff
from poppy_django.observe.streaks import Streak

logger = logging.getLogger("poppy_django.auth")

#: Where a process acknowledges a revocation: this prefix and the publisher's nonce.
ACK_PREFIX = "poppy:session-revoked:ack:"
#: How long :func:`publish` waits for every process's acknowledgement.
ACK_SECONDS = 2.0
#: The subscription's pause between attempts (a test's counts them and does not wait).
subscription_backoff: Callable[[], Backoff] = Backoff
#: Redis away: the lost and refused attempts are one warning a streak (with the cause), and
#: the subscription confirmed again one line, not a warning and a traceback per attempt.
_failures = Streak(logger, "subscribing to Redis for revocations")
#: Said with the first failure of a streak: what the process does meanwhile.
SUBSCRIPTION_HINT = "session statuses are not memoized meanwhile; each request reads the cache"

#: ``forget(session_ids)`` of the status cache; None forgets everything.
Forget = Callable[[frozenset[str] | None], None]

_lock = threading.Lock()
_thread: threading.Thread | None = None
_listening = threading.Event()
#: Set to stop the current listener (its Redis changed).
_stop = threading.Event()


def channel() -> str:
    """The pub/sub channel revocations are published on, in this deployment's namespace
    (pub/sub is server-wide: another deployment on the same Redis server never hears it)."""
    return f"{namespace()}:session-revoked"


def redis_kwargs() -> dict[str, Any] | None:
    """redis-py's connection arguments: the fan-out bus's (``EVENTSTREAM_REDIS``)."""
    return getattr(settings, "EVENTSTREAM_REDIS", None) or None


def listening(forget: Forget) -> bool:
    """Whether this process hears every revocation (so it may memoize); starts listening."""
    if redis_kwargs() is None:
        return True  # one process: revocations reach the memo directly
    _ensure_listener(forget)
    return _listening.is_set()


def publish(session_ids: Iterable[str], forget: Forget) -> None:
    """Drop ``session_ids`` from every process's memo; return once they all said so."""
    ids = frozenset(session_ids)
    forget(ids)
    kwargs = redis_kwargs()
    if kwargs is None or not ids:
        return
    reply = ACK_PREFIX + secrets.token_urlsafe(12)
    client = redis.Redis(**kwargs)
    try:
        receivers = int(client.publish(channel(), json.dumps({"ids": sorted(ids), "reply": reply})))
        deadline = time.monotonic() + ACK_SECONDS
        acknowledged = 0
        while acknowledged < receivers:
            left = deadline - time.monotonic()
            if left <= 0 or client.blpop([reply], timeout=max(left, 0.01)) is None:
                logger.warning(
                    "poppy: %d of %d processes did not acknowledge a revocation within %.1f s",
                    receivers - acknowledged,
                    receivers,
                    ACK_SECONDS,
                )
                return
            acknowledged += 1
    except redis.RedisError:
        # Processes whose subscription is down do not memoize; the others, if Redis is
        # away for them too, cannot hear it either and stop memoizing as it drops.
        logger.warning("poppy: a revocation could not be published", exc_info=True)
    finally:
        client.close()


def _ensure_listener(forget: Forget) -> None:
    global _thread, _stop
    if _thread is not None and _thread.is_alive():
        return
    with _lock:
        if _thread is None or not _thread.is_alive():
            _stop = threading.Event()
            _thread = threading.Thread(
                target=_listen_forever,
                args=(forget, redis_kwargs() or {}, _stop),
                name="poppy-revocations",
                daemon=True,
            )
            _thread.start()


@receiver(setting_changed)
def _stop_on_change(*, setting: str, **kwargs: Any) -> None:
    """Another Redis (tests): the next status read subscribes to it."""
    global _thread
    if setting == "EVENTSTREAM_REDIS":
        with _lock:
            _stop.set()
            _listening.clear()
            _thread = None


def _listen_forever(forget: Forget, kwargs: dict[str, Any], stop: threading.Event) -> None:
    """Hold the subscription, starting again with backoff whenever it fails (a listener
    stopped for another Redis says nothing of its last attempt: its successor will)."""
    backoff = subscription_backoff()
    while not stop.is_set():
        started = time.monotonic()
        try:
            _listen(forget, kwargs, stop)
        except Exception as exc:
            if not stop.is_set():
                _failures.failed(exc, SUBSCRIPTION_HINT)
        finally:
            if not stop.is_set():
                _listening.clear()
        if not stop.is_set():
            stop.wait(backoff.after(time.monotonic() - started))


def _listen(forget: Forget, kwargs: dict[str, Any], stop: threading.Event) -> None:
    client = redis.Redis(**kwargs, health_check_interval=10)
    try:
        with client.pubsub() as pubsub:
            pubsub.subscribe(channel())
            while not stop.is_set():
                message = pubsub.get_message(timeout=1.0)
                if message is None:
                    continue
                if message["type"] == "subscribe" and not stop.is_set():
                    forget(None)  # revocations published while unsubscribed are unknown
                    _failures.succeeded()
                    _listening.set()
                elif message["type"] == "message":
                    _received(client, message["data"], forget)
    finally:
        client.close()


def _received(client: redis.Redis, raw: bytes, forget: Forget) -> None:
    try:
        message = json.loads(raw)
        ids, reply = frozenset(map(str, message["ids"])), str(message["reply"])
    except (ValueError, KeyError, TypeError):
        logger.warning("poppy: ignored a malformed revocation message: %.200r", raw)
        return
    forget(ids)
    client.rpush(reply, 1)
    client.expire(reply, int(ACK_SECONDS) + 5)
