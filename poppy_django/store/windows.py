"""Fixed-window counters in a Django cache shared by every process (attempts, reports).

A window starts with the first count under a key and lasts ``seconds``; ``cache.add`` and
``cache.incr`` are atomic in the Redis, Memcached and database backends, so processes that
count at once never lose a count. Keys are hashed: they are built from caller-chosen text.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import time

from poppy_django.process_cache import shared_cache

PREFIX = "poppy:window:"


def key(name: str) -> str:
    """The cache key of ``name`` (hashed: names are built from caller-chosen text)."""
    return PREFIX + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()


def count(name: str, *, seconds: float, alias: str = "default") -> int:
    """Add one to ``name``'s window and return the count so far in it."""
    cache = shared_cache(alias)
    hashed = key(name)
    timeout = max(1, math.ceil(seconds))
    cache.add(hashed + ":since", time.time(), timeout=timeout)
    cache.add(hashed, 0, timeout=timeout)
    try:
        return int(cache.incr(hashed))
    except ValueError:  # the window ended between add and incr
        cache.add(hashed, 1, timeout=timeout)
        return 1


def current(name: str, *, alias: str = "default") -> int:
    """The count of ``name``'s window (0 once it ended)."""
    return int(shared_cache(alias).get(key(name), 0))


def retry_after(name: str, *, seconds: float, alias: str = "default") -> int:
    """Whole seconds until ``name``'s window ends (at least 1)."""
    since = shared_cache(alias).get(key(name) + ":since")
    left = seconds - (time.time() - float(since)) if since is not None else seconds
    return max(1, math.ceil(left))


def uncount(name: str, *, alias: str = "default") -> None:
    """Take one back from ``name``'s window (nothing once it ended)."""
    with contextlib.suppress(ValueError):  # the window ended meanwhile
        shared_cache(alias).decr(key(name))


def clear(name: str, *, alias: str = "default") -> None:
    shared_cache(alias).delete_many([key(name), key(name) + ":since"])
