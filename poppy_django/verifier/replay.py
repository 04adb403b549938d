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

from poppy_django.process_cache import shared_cache, shared_redis

PREFIX = "poppy:dpop:jti:"


def first_use(jkt: str, jti: str, *, ttl: float, alias: str = "default") -> bool:
    """Record a proof's ``jti`` (scoped to its key); False when it was seen before.

    The key is a hash: ``jti`` is attacker-chosen text and must not shape cache keys.
    """
    # surrogatepass: JSON may carry a lone surrogate, which plain UTF-8 cannot encode.
    digest = hashlib.sha256(f"{jkt}\x00{jti}".encode("utf-8", "surrogatepass")).hexdigest()
    timeout = max(1, math.ceil(ttl))
    client = shared_redis(alias)
    if client is None:
        return bool(shared_cache(alias).add(PREFIX + digest, 1, timeout=timeout))
    # The key is a fixed prefix and a hex digest: nothing for the backend's validation to
    # find. execute_command: the same SET, without redis-py's per-call argument checks.
    key = shared_cache(alias).make_key(PREFIX + digest)
    return bool(client.execute_command("SET", key, 1, "NX", "EX", timeout))
