"""One Django cache backend per alias for the whole process (replay cache, session status,
rate limits).

``caches[alias]`` is per request context under ASGI, and Django's Redis backend builds a
connection pool per instance: every request that touched the cache paid a new Redis
connection. The backends a deployment uses here (Redis, Memcached, database, local memory)
are safe to share between threads.
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache import BaseCache, caches
from django.core.signals import setting_changed
from django.dispatch import receiver

_backends: dict[str, BaseCache] = {}
_lock = threading.Lock()


def shared_cache(alias: str) -> BaseCache:
    """The process's backend for ``alias``, created on first use."""
    backend = _backends.get(alias)
    if backend is None:
        with _lock:
            backend = _backends.get(alias)
            if backend is None:
                backend = _backends[alias] = caches.create_connection(alias)
    return backend


def forget() -> None:
    """Drop the backends: the next use creates them from the current ``CACHES``."""
    _backends.clear()


@receiver(setting_changed)
def _forget_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting == "CACHES":
        forget()
