"""The DPoP ``jti`` replay cache, in a Django cache shared by every process.

``cache.add`` is atomic in the Redis, Memcached and database backends, so two processes that
receive the same proof at once cannot both accept it. Entries expire when the proof would be
refused as stale anyway, so the cache never grows beyond one window of traffic.
"""

from __future__ import annotations

import hashlib
import math
import threading
from typing import Any

from django.core.cache import BaseCache, caches
from django.core.signals import setting_changed
from django.dispatch import receiver

PREFIX = "poppy:dpop:jti:"

_backends: dict[str, BaseCache] = {}
_lock = threading.Lock()


def shared_cache(alias: str) -> BaseCache:
    """One backend per alias for the whole process.

    ``caches[alias]`` is per request context under ASGI, and Django's Redis backend builds a
    connection pool per instance: every verified request paid a new Redis connection. The
    backends used here (Redis, Memcached, database) are safe to share between threads.
    """
    backend = _backends.get(alias)
    if backend is None:
        with _lock:
            backend = _backends.get(alias)
            if backend is None:
                backend = _backends[alias] = caches.create_connection(alias)
    return backend


@receiver(setting_changed)
def _forget_backends(*, setting: str, **kwargs: Any) -> None:
    if setting == "CACHES":
        _backends.clear()


def first_use(jkt: str, jti: str, *, ttl: float, alias: str = "default") -> bool:
    """Record a proof's ``jti`` (scoped to its key); False when it was seen before.

    The key is a hash: ``jti`` is attacker-chosen text and must not shape cache keys.
    """
    # surrogatepass: JSON may carry a lone surrogate, which plain UTF-8 cannot encode.
    digest = hashlib.sha256(f"{jkt}\x00{jti}".encode("utf-8", "surrogatepass")).hexdigest()
    return bool(shared_cache(alias).add(PREFIX + digest, 1, timeout=max(1, math.ceil(ttl))))
