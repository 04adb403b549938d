"""Celery tasks (turns; pruning for beat), each worker's recovery sweep, and its pool check.

A turn's task only dispatches: it waits for a free place in the worker process's turn engine
(:mod:`poppy_django.engine.loop`; while it waits the worker takes no more messages) and hands the
conversation over, so one worker process keeps up to ``TURNS_IN_FLIGHT`` turns in flight
whatever its pool's concurrency. The message is acknowledged once the turn is in flight: the
conversation is ``working`` in the database from then on, and if the process dies its lease
expires and a recovery sweep takes it up.

A worker starts its recovery sweep when it is ready (prefork: in each child process, which
runs its own engine) and stops it when it shuts down, so a deployment of web processes and
workers recovers from a dead worker with no beat at all. At the same moment it freezes its
start-up heap out of the garbage collector (:mod:`poppy_django.engine.heap`).

Pools: ``prefork``, ``threads`` and ``solo`` run the engine in each worker process;
``gevent`` and ``eventlet`` refuse to start (their monkey-patching would turn the engine's
threads and loop into greenlets of one hub).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import shared_task
from celery.signals import (
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
    worker_shutting_down,
)

from poppy_django.conf import poppy_settings
from poppy_django.engine import heap
from poppy_django.engine import loop as engine
from poppy_django.engine.executors import run_turns_task
from poppy_django.engine.maintenance import prune_by_retention, reap
from poppy_django.engine.recovery import sweeper
from poppy_django.observe import sdk, tracing

# The Operations extension's task, registered wherever Celery finds this module.
from poppy_django.operations.perform import perform_operation_task

logger = logging.getLogger(__name__)

#: The pools whose worker processes run the turn engine.
SUPPORTED_POOLS = ("prefork", "threads", "solo")
#: Set by :func:`_check_pool`: whether each child process (prefork) or the worker itself runs
#: the engine and the sweep.
_per_child = False


@shared_task(name="poppy_django.reap")
def reap_task() -> int:
    """Re-dispatch orphaned conversations (only needed with ``SWEEP_SECONDS = None``)."""
    return len(reap())


@shared_task(name="poppy_django.prune")
def prune_task() -> int:
    """Prune events past ``POPPY["RETENTION_SECONDS"]``; schedule it hourly or daily."""
    report = prune_by_retention()
    return report.events if report else 0


def pool_name(pool_cls: Any) -> str:
    """The pool a worker was started with, as ``-P`` names it (read without importing it:
    gevent's module needs gevent)."""
    # The ``-P`` names (celery-types does not declare them).
    from celery.concurrency import ALIASES  # type: ignore[attr-defined]

    if isinstance(pool_cls, str):
        target = ALIASES.get(pool_cls) or pool_cls
    else:
        target = f"{pool_cls.__module__}:{pool_cls.__qualname__}"
    names: dict[str, str] = {}
    for name, path in ALIASES.items():
        if path:
            names.setdefault(path, name)  # "prefork" before its other name, "processes"
    return names.get(target, pool_cls if isinstance(pool_cls, str) else target)


#: The ids each running task of the app restored, undone when it ends (by task id).
_restored: dict[str, Callable[[], None]] = {}


@task_prerun.connect
def _restore_ids(task_id: str = "", task: Any = None, **kwargs: Any) -> None:
    """From its start to its end, a task of the app runs in its dispatch's trace and request:
    Celery's lines about it (succeeded, failed, retried) name them, as the app's do."""
    if task is None or not str(getattr(task, "name", "")).startswith("poppy_django."):
        return
    request = task.request
    _restored[task_id] = tracing.restore_ids(
        {**(getattr(request, "headers", None) or {}), **vars(request)}
    )


@task_postrun.connect
def _forget_ids(task_id: str = "", **kwargs: Any) -> None:
    undo = _restored.pop(task_id, None)
    if undo is not None:
        undo()


@worker_init.connect
def _check_pool(sender: Any = None, **kwargs: Any) -> None:
    """Refuse to start a worker whose pool cannot run the engine (a clear message, exit 1)."""
    global _per_child
    name = pool_name(getattr(sender, "pool_cls", "prefork"))
    if name not in SUPPORTED_POOLS:
        message = (
            f"poppy-django: the Celery pool {name!r} cannot run turns; start the worker with "
            f"--pool prefork, threads or solo (see docs/deployment.md)."
        )
        logger.critical(message)
        raise SystemExit(message)  # not an Exception: Celery's signal dispatch lets it through
    _per_child = name == "prefork"
    if not _per_child:  # a prefork pool's children configure their own (_start_engine)
        sdk.configure_if_enabled()


@worker_process_init.connect
def _start_engine(**kwargs: Any) -> None:
    """A prefork child (or the solo worker) starts its engine now, not at its first turn."""
    engine.current()
    if _per_child:
        sdk.configure_if_enabled()
        heap.settle()
        sweeper.start()


@worker_ready.connect
def _start_recovery(**kwargs: Any) -> None:
    if _per_child:
        return  # each child sweeps with its own engine, and settles its own heap

    heap.settle()
    sweeper.start()


@worker_shutting_down.connect
def _stop_recovery(**kwargs: Any) -> None:
    sweeper.stop(wait=False)


@worker_shutdown.connect
def _finish_turns(**kwargs: Any) -> None:
    """A warm shutdown finishes the turns in flight first (a solo or threads worker; a
    prefork child does it as it leaves, :func:`_finish_child_turns`)."""
    _drain_engine()


@worker_process_shutdown.connect
def _finish_child_turns(**kwargs: Any) -> None:
    """A prefork child leaving (the worker's warm shutdown closed the pool, or it reached
    ``--max-tasks-per-child``) finishes its turns in flight before it exits: its task
    returned when it handed the turn to the engine, so Celery would not wait for them.

    A child killed outright (SIGKILL, or a SIGTERM sent to it directly, which Celery's
    children do not catch) takes its turns with it: their leases expire and the recovery
    sweep of another process takes them up.
    """
    if not _per_child:
        return

    sweeper.stop(wait=False)
    _drain_engine()


def _drain_engine() -> None:
    running = engine.running()
    if running is not None:
        running.drain(timeout=poppy_settings.TURN_TIMEOUT_SECONDS + 5)
        engine.stop(wait=False)


__all__ = ["perform_operation_task", "prune_task", "reap_task", "run_turns_task"]
