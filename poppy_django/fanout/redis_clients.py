"""The fan-out's Redis: its connection arguments, this deployment's name on the server, and
the process's clients.

The bus (:mod:`.bus`) and the conversations' versions (:mod:`.versions`) both reach Redis
through these, so a process holds one publishing client for both, whichever calls first,
and one reading client per event loop. Without ``EVENTSTREAM_REDIS`` (the embedded default)
there is no Redis, and both keep to this process.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import Any

import redis
import redis.asyncio
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from poppy_django.conf import poppy_settings


def redis_kwargs() -> dict[str, Any] | None:
    """redis-py's connection arguments for the fan-out, shared with django-eventstream."""
    return getattr(settings, "EVENTSTREAM_REDIS", None) or None


def namespace() -> str:
    """This deployment's name on its Redis server: ``<REDIS_PREFIX>:<database number>``."""
    return f"{poppy_settings.REDIS_PREFIX}:{int((redis_kwargs() or {}).get('db') or 0)}"


_publisher_client: redis.Redis | None = None
_publisher_lock = threading.Lock()
_readers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, redis.asyncio.Redis] = (
    weakref.WeakKeyDictionary()
)


def publisher() -> redis.Redis:
    """The process's client for publishing (redis-py clients are thread-safe)."""
    global _publisher_client
    client = _publisher_client
    if client is None:
        with _publisher_lock:
            if _publisher_client is None:
                _publisher_client = redis.Redis(**(redis_kwargs() or {}))
            client = _publisher_client
    return client


def reader(kwargs: dict[str, Any]) -> redis.asyncio.Redis:
    """The running event loop's client, made with ``kwargs`` (:func:`redis_kwargs`) the first
    time: an asyncio client belongs to the loop it first ran on."""
    loop = asyncio.get_running_loop()
    client = _readers.get(loop)
    if client is None:
        client = _readers[loop] = redis.asyncio.Redis(**kwargs)
    return client


@receiver(setting_changed)
def _forget_clients_on_change(*, setting: str, **kwargs: Any) -> None:
    global _publisher_client
    if setting == "EVENTSTREAM_REDIS":
        with _publisher_lock:
            _publisher_client = None
        _readers.clear()
