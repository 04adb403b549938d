"""Celery tasks (turns; pruning for beat) and each worker's recovery sweep.

A worker starts its recovery sweep when it is ready and stops it when it shuts down, so a
deployment of web processes and workers recovers from a dead worker with no beat at all.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_ready, worker_shutting_down


@shared_task(name="poppy_django.run_turns", acks_late=True, reject_on_worker_lost=True)
def run_turns_task(conversation_id: str) -> None:
    """Answer a conversation; a duplicate delivery finds the lease taken and returns."""
    from poppy_django.turns import run_turns

    run_turns(conversation_id)


@shared_task(name="poppy_django.reap")
def reap_task() -> int:
    """Re-dispatch orphaned conversations (only needed with ``SWEEP_SECONDS = None``)."""
    from poppy_django.maintenance import reap

    return len(reap())


@shared_task(name="poppy_django.prune")
def prune_task() -> int:
    """Prune events past ``POPPY["RETENTION_SECONDS"]``; schedule it hourly or daily."""
    from poppy_django.maintenance import prune_by_retention

    report = prune_by_retention()
    return report.events if report else 0


@worker_ready.connect
def _start_recovery(**kwargs: Any) -> None:
    from poppy_django.recovery import sweeper

    sweeper.start()


@worker_shutting_down.connect
def _stop_recovery(**kwargs: Any) -> None:
    from poppy_django.recovery import sweeper

    sweeper.stop(wait=False)


# The Operations extension's task, registered wherever Celery finds this module.
from poppy_django.operations.tasks import perform_operation_task  # noqa: E402

__all__ = ["perform_operation_task", "prune_task", "reap_task", "run_turns_task"]
