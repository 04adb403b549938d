"""The DPoP ``jti`` replay cache, in a Django cache shared by every process.

``cache.add`` is atomic in the Redis, Memcached and database backends, so two processes that
receive the same proof at once cannot both accept it. Entries expire when the proof would be
refused as stale anyway, so the cache never grows beyond one window of traffic. On a Redis
cache the check is one ``SET NX EX`` on the process's client
(:func:`poppy_django.process_cache.shared_redis`), the same command and key Django's ``add``
would send.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Awaitable, Callable

from django.core.cache.backends.locmem import LocMemCache

from poppy_django.process_cache import shared_async_redis, shared_cache, shared_redis

PREFIX = "poppy:dpop:jti:"


def first_use(jkt: str, jti: str, *, ttl: float, alias: str = "default") -> bool:
    """Record a proof's ``jti`` (scoped to its key); False when it was seen before.

    The key is a hash: ``jti`` is attacker-chosen text and must not shape cache keys.
    """
    digest, timeout = _digest(jkt, jti), _timeout(ttl)
    client = shared_redis(alias)
    if client is None:
        return bool(shared_cache(alias).add(PREFIX + digest, 1, timeout=timeout))
    # The key is a fixed prefix and a hex digest: nothing for the backend's validation to
    # find. execute_command: the same SET, without redis-py's per-call argument checks.
    key = shared_cache(alias).make_key(PREFIX + digest)
    return bool(client.execute_command("SET", key, 1, "NX", "EX", timeout))


def spend_without_blocking(
    jkt: str, jti: str, *, ttl: float, alias: str = "default"
) -> Callable[[], Awaitable[bool]] | None:
    """:func:`first_use` to await on an event loop: the same ``SET NX EX`` on this loop's
    client of a Redis cache, or the process's own memory; None for a cache that would block
    it (the caller then checks in a thread)."""
    digest, timeout = _digest(jkt, jti), _timeout(ttl)
    client = shared_async_redis(alias)
    if client is not None:
        key = shared_cache(alias).make_key(PREFIX + digest)

        async def on_redis() -> bool:
            return bool(await client.execute_command("SET", key, 1, "NX", "EX", timeout))

        return on_redis
    backend = shared_cache(alias)
    if not isinstance(backend, LocMemCache):
        return None

    async def in_memory() -> bool:
        return bool(backend.add(PREFIX + digest, 1, timeout=timeout))

    return in_memory


def _digest(jkt: str, jti: str) -> str:
    # surrogatepass: JSON may carry a lone surrogate, which plain UTF-8 cannot encode.
    return hashlib.sha256(f"{jkt}\x00{jti}".encode("utf-8", "surrogatepass")).hexdigest()


def _timeout(ttl: float) -> int:
    return max(1, math.ceil(ttl))
