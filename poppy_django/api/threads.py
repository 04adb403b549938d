"""Threads for async views: blocking (ORM) work off the event loop, and no idle request thread.

:func:`release_request_thread` is the one place that reaches past asgiref's public API.
Django's ASGI handler runs each request in an asgiref ``ThreadSensitiveContext``; its first
thread-sensitive call (Django's own ``request_started`` receivers) starts a worker thread
that then idles until the response ends — one thread per waiting reader, thousands for
thousands of long-polls. asgiref offers no public way to end that thread early, so this
shuts down the context's executor through ``SyncToAsync.thread_sensitive_context`` and
``SyncToAsync.context_to_thread_executor`` (asgiref's range is pinned in ``pyproject.toml``;
``tests/stream/test_threads.py`` fails loudly when the behaviour changes). A later
thread-sensitive call of the same request (``request_finished``) starts a new thread for its
moment.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import SyncToAsync, sync_to_async
from django.db import close_old_connections

logger = logging.getLogger("poppy_django.threads")

P = ParamSpec("P")
T = TypeVar("T")


async def in_thread(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run blocking (ORM) work off the event loop, returning its connection when done."""

    def call() -> T:
        try:
            return function(*args, **kwargs)
        finally:
            close_old_connections()

    return await sync_to_async(call, thread_sensitive=False)()


def release_request_thread() -> None:
    """Give back the thread Django's ASGI handler keeps for this request while it waits."""
    try:
        context = SyncToAsync.thread_sensitive_context.get(None)
        executors = SyncToAsync.context_to_thread_executor
    except AttributeError:  # pragma: no cover - an asgiref outside the pinned range
        logger.warning("poppy: this asgiref cannot release request threads; readers hold one")
        return
    executor = executors.pop(context, None) if context is not None else None
    if executor is not None:
        executor.shutdown(wait=False)
