"""One Django cache backend per alias for the whole process (replay cache, session status,
rate limits).

``caches[alias]`` is per request context under ASGI, and Django's Redis backend builds a
connection pool per instance: every request that touched the cache paid a new Redis
connection. The backends a deployment uses here (Redis, Memcached, database, local memory)
are safe to share between threads.

:func:`shared_redis` goes one step further for an alias on Django's ``RedisCache`` backend
with no ``OPTIONS``: one redis-py client for the process, so a hot path (the replay check,
the rate limit) is one command and one round trip, where Django's backend builds a client
object for every call and its ``incr`` is two commands. Keys are the backend's own
(``make_key``), and values the ones it stores for integers (plain numbers), so both paths
read and write the same entries.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from contextvars import ContextVar
from typing import Any

from django.core.cache import BaseCache, caches
from django.core.signals import setting_changed
from django.dispatch import receiver

_backends: dict[str, BaseCache] = {}
_clients: dict[str, Any] = {}
_lock = threading.RLock()  # shared_redis() creates the backend under it
_NO_CLIENT = object()


def shared_cache(alias: str) -> BaseCache:
    """The process's backend for ``alias``, created on first use."""
    backend = _backends.get(alias)
    if backend is None:
        with _lock:
            backend = _backends.get(alias)
            if backend is None:
                backend = _backends[alias] = caches.create_connection(alias)
    return backend


def shared_redis(alias: str) -> Any | None:
    """The process's redis-py client for ``alias`` when it is Django's ``RedisCache`` with no
    ``OPTIONS`` (its first ``LOCATION``, which Django writes to); None otherwise (the
    caller uses the Django backend)."""
    client = _clients.get(alias)
    if client is None:
        with _lock:
            client = _clients.get(alias)
            if client is None:
                client = _clients[alias] = _redis_for(alias)
    return None if client is _NO_CLIENT else client


_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Any]] = (
    weakref.WeakKeyDictionary()
)
#: Set while a request runs on an ASGI server's event loop, which outlives it: only there
#: may a client be made for the loop (one made on a loop closed after its request, as
#: ``async_to_sync`` makes for a WSGI request, would leave its connections to the GC).
serving_loop: ContextVar[bool] = ContextVar("poppy_serving_loop", default=False)


def shared_async_redis(alias: str) -> Any | None:
    """:func:`shared_redis`'s server through redis-py's asyncio client of the running event
    loop (a client is bound to one loop); None where :func:`shared_redis` is, and off a
    :data:`serving_loop`."""
    client = shared_redis(alias)
    if client is None or not serving_loop.get():
        return None
    per_loop = _async_clients.setdefault(asyncio.get_running_loop(), {})
    found = per_loop.get(alias)
    if found is None:
        import redis.asyncio

        found = per_loop[alias] = redis.asyncio.Redis.from_url(_location(alias))
    return found


def _redis_for(alias: str) -> Any:
    from django.conf import settings
    from django.core.cache.backends.redis import RedisCache

    config = settings.CACHES.get(alias, {})
    if not isinstance(shared_cache(alias), RedisCache) or config.get("OPTIONS"):
        return _NO_CLIENT
    if not _location(alias):
        return _NO_CLIENT
    import redis

    return redis.Redis.from_url(_location(alias))


def _location(alias: str) -> str:
    """The first server of the alias's ``LOCATION`` (the one Django's backend writes to)."""
    from django.conf import settings

    location = settings.CACHES.get(alias, {}).get("LOCATION")
    servers = location.split(",") if isinstance(location, str) else list(location or [])
    return str(servers[0]).strip() if servers else ""


def forget() -> None:
    """Drop the backends: the next use creates them from the current ``CACHES``."""
    _backends.clear()
    _clients.clear()
    _async_clients.clear()


@receiver(setting_changed)
def _forget_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting == "CACHES":
        forget()
