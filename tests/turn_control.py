"""Holding the turn engine still for a test: dispatches lost, and the SQL its turns run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from poppy_django.engine import loop as engine
from poppy_django.engine.executors import ThreadExecutor


@contextmanager
def dispatch_lost() -> Iterator[None]:
    """Messages recorded meanwhile are never dispatched, as if their process died at commit."""
    original = ThreadExecutor.dispatch
    ThreadExecutor.dispatch = classmethod(lambda cls, conversation_id: None)  # type: ignore[assignment]
    try:
        yield
    finally:
        ThreadExecutor.dispatch = original  # type: ignore[method-assign]


@contextmanager
def engine_queries() -> Iterator[list[str]]:
    """The SQL of the turns run meanwhile, in order: the engine runs them on one database
    thread, whose connection is captured (the heartbeat, every ``HEARTBEAT_SECONDS``, is not
    a turn's)."""
    with override_settings(POPPY={**settings.POPPY, "EXECUTOR_THREADS": 1}):
        database = engine.current().database
        capture = CaptureQueriesContext(connection)
        database.submit(capture.__enter__).result()
        sql: list[str] = []
        try:
            yield sql
        finally:
            database.submit(capture.__exit__, None, None, None).result()
            sql.extend(
                database.submit(
                    lambda: [query["sql"] for query in capture.captured_queries]
                ).result()
            )
