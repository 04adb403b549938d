"""Bounds per caller: request rates (DRF throttles) and concurrent waiting reads.

Rates are DRF's :class:`~rest_framework.throttling.ScopedRateThrottle` keyed by personal
agent and User, with the rates of ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]`` or
``POPPY["THROTTLE_RATES"]`` for each view's ``throttle_scope`` (starts and messages by
default); counts live in Django's default cache.
A refusal is the wire's ``429 too_many_requests`` with ``Retry-After``.

Waiting reads (long-polls and streams) are not requests per minute but connections held:
:class:`WaitingSlots` counts them in this process, per caller and in all, and refuses one
past ``MAX_WAITING_PER_CALLER`` / ``MAX_WAITING_PER_PROCESS`` with the same 429.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import Counter
from typing import Any

from django.core.cache import DEFAULT_CACHE_ALIAS
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import ScopedRateThrottle

from poppy_django.conf import poppy_settings
from poppy_django.errors import PoppyError
from poppy_django.process_cache import shared_cache, shared_redis
from poppy_django.verifier import Principal

logger = logging.getLogger("poppy_django.throttling")

#: What a client refused a waiting read is told to wait before trying again, in seconds.
WAITING_RETRY_AFTER_SECONDS = 5


def caller_key(principal: Principal) -> str:
    """Stable per personal agent and User, and free of what a cache key may not hold."""
    raw = f"{principal.client_id}\n{principal.user_id}".encode()
    return hashlib.sha256(raw).hexdigest()[:32]


class PoppyRateThrottle(ScopedRateThrottle):
    """DRF's scoped rate throttle per personal agent and User, for the view's ``throttle_scope``.

    The rate of a scope is ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"][scope]`` when the
    project names it there, else ``POPPY["THROTTLE_RATES"][scope]`` (the app's defaults for
    ``conversation_start`` and ``message``). A view without a scope, or a scope whose rate is
    None or missing, is not limited. While the cache is unreachable requests are let through
    (logged): a limit is protection, and a Redis restart must not turn messages the database
    could record into errors. Counting is a fixed window (``rate`` requests per period, the
    period aligned to the clock) kept by an atomic ``cache.incr``: one cache call per
    request, and concurrent requests from several processes cannot slip past the count (DRF's
    default history list is read and written back, a race across processes).
    """

    def __init__(self) -> None:  # the rate depends on the view: see allow_request
        self.cache = shared_cache(DEFAULT_CACHE_ALIAS)

    def get_rate(self) -> str | None:
        """The scope's rate: DRF's ``DEFAULT_THROTTLE_RATES``, else ``POPPY["THROTTLE_RATES"]``."""
        drf_rates: dict[str, Any] = dict(api_settings.DEFAULT_THROTTLE_RATES or {})
        scope = str(self.scope)
        if scope in drf_rates:
            return None if drf_rates[scope] is None else str(drf_rates[scope])
        rate: str | None = (poppy_settings.THROTTLE_RATES or {}).get(scope)
        return rate

    def allow_request(self, request: Request, view: Any) -> bool:
        self.scope = getattr(view, self.scope_attr, None)
        if not self.scope:
            return True
        self.rate = self.get_rate()
        if self.rate is None:
            return True
        allowed, seconds = self.parse_rate(self.rate)
        key = self.get_cache_key(request, view)
        if key is None or allowed is None or seconds is None:
            return True
        self.now = self.timer()
        window = int(self.now // seconds)
        self.window_ends = (window + 1) * seconds
        try:
            count = self._count(f"{key}:{window}", seconds)
        except Exception:  # the cache is down (a Redis restart): count nothing, refuse nothing
            logger.warning("poppy: rate limit not counted, the cache failed", exc_info=True)
            return True
        return count <= allowed

    def _count(self, key: str, seconds: int) -> int:
        """This request's number in the window (atomic with every backend's ``incr``; on a
        Redis cache one script, one round trip: ``INCR``, and the window's expiry set by its
        first request)."""
        client = shared_redis(DEFAULT_CACHE_ALIAS)
        if client is not None:
            return _window_count(client, self.cache.make_and_validate_key(key), seconds + 1)
        try:
            return int(self.cache.incr(key))
        except ValueError:  # the window's first request (or its key just expired)
            if self.cache.add(key, 1, timeout=seconds + 1):
                return 1
            return int(self.cache.incr(key))

    def wait(self) -> float:
        """Seconds until the window ends (DRF sends it as ``Retry-After``)."""
        return max(0.0, self.window_ends - self.now)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if not isinstance(request.auth, Principal):
            return None  # not a verified caller: authentication refuses it anyway
        return f"poppy:throttle:{self.scope}:{caller_key(request.auth)}"


_WINDOW_COUNT = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return n
"""
_script: Any = None


def _window_count(client: Any, key: str, expiry: int) -> int:
    """The window's count after this request, by the script (``EVALSHA``, loaded by redis-py
    when the server does not have it)."""
    global _script
    if _script is None:
        _script = client.register_script(_WINDOW_COUNT)
    return int(_script(keys=[key], args=[expiry], client=client))


def too_many(description: str, retry_after: int) -> PoppyError:
    return PoppyError(
        "too_many_requests", description, headers={"Retry-After": str(max(1, retry_after))}
    )


class WaitingSlots:
    """Counts this process's waiting reads, per caller and in all (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._per_caller: Counter[str] = Counter()
        self._total = 0

    def acquire(self, principal: Principal) -> Slot:
        """A slot for one waiting read, or ``429 too_many_requests``."""
        key = caller_key(principal)
        per_caller = poppy_settings.MAX_WAITING_PER_CALLER
        per_process = poppy_settings.MAX_WAITING_PER_PROCESS
        with self._lock:
            if self._per_caller[key] >= per_caller:
                raise too_many(
                    f"At most {per_caller} streams and long-polls at once per caller.",
                    WAITING_RETRY_AFTER_SECONDS,
                )
            if self._total >= per_process:
                raise too_many(
                    "This server holds as many streams and long-polls as it may.",
                    WAITING_RETRY_AFTER_SECONDS,
                )
            self._per_caller[key] += 1
            self._total += 1
        return Slot(self, key)

    def _release(self, key: str) -> None:
        with self._lock:
            self._per_caller[key] -= 1
            if self._per_caller[key] <= 0:
                del self._per_caller[key]
            self._total -= 1

    @property
    def total(self) -> int:
        return self._total


class Slot:
    """One held waiting read; releasing it twice releases it once."""

    def __init__(self, slots: WaitingSlots, key: str) -> None:
        self._slots = slots
        self._key = key
        self._held = True
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            if not self._held:
                return
            self._held = False
        self._slots._release(self._key)


#: This process's waiting reads.
waiting_slots = WaitingSlots()
