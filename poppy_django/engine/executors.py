"""Where turns run: this process's turn engine (embedded default) or Celery workers'.

``POPPY["EXECUTOR"]`` names the class; its ``dispatch(conversation_id)`` is called after the
message that needs a turn is committed. Both run :func:`poppy_django.engine.turns.answer` on a
process's turn engine (:mod:`poppy_django.engine.loop`), so the semantics (lease, retries,
exactly-once reply) and the number of turns one process keeps in flight are the same, and
both recover turns whose writer died with no extra process: Celery workers start their
recovery sweep when ready (:mod:`poppy_django.tasks`); the embedded executor's process starts
it with its engine or at its first request after a restart (:func:`recover_on_request`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import shared_task
from django.core.exceptions import ImproperlyConfigured

from poppy_django.conf import in_test_run, poppy_settings
from poppy_django.engine import loop as engine
from poppy_django.engine.broker_health import celery_app_problem
from poppy_django.engine.recovery import sweeper
from poppy_django.observe.task_requests import CorrelatedTask
from poppy_django.observe.tracing import task_headers, task_started

logger = logging.getLogger("poppy_django.executors")


#: Set while a test asked for the background loops (:func:`background_loops`).
_loops_asked: list[bool] = []


def background_loops_allowed() -> bool:
    """Whether this process may start its background loops (the recovery sweep, and the
    engine at a request): always, but in a test run only while a test asked for them.

    A test of an adopter's own view sends ``request_started`` like any request: the sweep
    it would start queries the test database from a thread of its own, whose connection
    outlives the test (PostgreSQL then refuses to drop the test database) and which fails
    noisily once the database is gone.
    """
    return _loops_asked[-1] if _loops_asked else not in_test_run()


@contextmanager
def background_loops(allowed: bool = True) -> Iterator[None]:
    """In the block, the background loops start as outside a test run (or, ``allowed=False``,
    never); they keep running after it until :meth:`ThreadExecutor.shutdown`."""
    _loops_asked.append(allowed)
    try:
        yield
    finally:
        _loops_asked.pop()


class ThreadExecutor:
    """Turns on this process's engine: no broker, one process only. A dispatch never waits:
    past ``TURNS_IN_FLIGHT`` the conversation waits in the engine's queue for a place."""

    #: Whether the recovery sweep was started with the engine.
    _started = False
    _lock = threading.Lock()

    @classmethod
    def start(cls) -> engine.Engine:
        """The engine, with this process's recovery sweep started alongside it (in a test
        run, only if the test asked: :func:`background_loops`)."""
        running = engine.current()
        with cls._lock:
            if not cls._started and background_loops_allowed():
                cls._started = True
                sweeper.start()
        return running

    @classmethod
    def dispatch(cls, conversation_id: str) -> None:
        cls.start().dispatch_soon(conversation_id)

    @classmethod
    def shutdown(cls, wait: bool = True) -> None:
        """Finish the turns in flight and queued (tests and graceful shutdown)."""
        with cls._lock:
            cls._started = False
        sweeper.stop(wait=wait)
        engine.stop(wait=wait)


def recover_on_request(**kwargs: Any) -> None:
    """``request_started`` receiver: a restarted embedded process recovers at once.

    (Only with the in-process executor: with Celery, the workers recover. In a test run,
    only if the test asked: :func:`background_loops`.)
    """
    if (
        poppy_settings.EXECUTOR is ThreadExecutor
        and not ThreadExecutor._started
        and background_loops_allowed()
    ):
        ThreadExecutor.start()


class CeleryExecutor:
    """Turns in Celery workers (``celery -A yourproject worker``), any number, anywhere.

    Its dispatch is a publish to the broker: made after the answer (:mod:`.handover`)."""

    waits_on_broker = True

    @staticmethod
    def dispatch(conversation_id: str) -> None:
        # Not through an app no worker reads (a forgotten import of the project's Celery app):
        # refused, so the failed dispatch is told with the fix (broker_health), once per
        # interval, and the recovery sweep answers the turn as for a broker that is down.
        app_problem = celery_app_problem()
        if app_problem is not None:
            problem, fix = app_problem
            raise ImproperlyConfigured(f"Turns are not dispatched: {problem}. {fix}")
        # One try, no publish retries (Celery's default retries took 1.7 s of the request
        # with the broker down): a dispatch that fails costs nothing, the sweep answers it.
        run_turns_task.apply_async((conversation_id,), retry=False, headers=task_headers())


@shared_task(
    name="poppy_django.run_turns",
    acks_late=True,
    reject_on_worker_lost=True,
    base=CorrelatedTask,  # Celery's own "received" line names the ids
)
def run_turns_task(conversation_id: str) -> None:
    """Hand the conversation to this process's engine once it has a place; a duplicate
    delivery finds the lease taken and ends at once. (Celery finds it through
    :mod:`poppy_django.tasks`; its name is what queued messages carry.)"""
    # The dispatch's trace and request id, from the task's headers, go with the turn.
    request = run_turns_task.request
    headers = {**(getattr(request, "headers", None) or {}), **vars(request)}
    with task_started("poppy.task", headers, conversation_id=conversation_id):
        engine.current().submit(conversation_id)
