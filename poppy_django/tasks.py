"""Celery tasks: turns, and the periodic maintenance a deployment schedules with beat."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="poppy_django.run_turns", acks_late=True, reject_on_worker_lost=True)
def run_turns_task(conversation_id: str) -> None:
    """Answer a conversation; a duplicate delivery finds the lease taken and returns."""
    from poppy_django.turns import run_turns

    run_turns(conversation_id)


@shared_task(name="poppy_django.reap")
def reap_task() -> int:
    """Re-dispatch conversations whose turn worker died; schedule it every ~15 s."""
    from poppy_django.maintenance import reap

    return len(reap())


@shared_task(name="poppy_django.prune")
def prune_task() -> int:
    """Prune events past ``POPPY["RETENTION_SECONDS"]``; schedule it hourly or daily."""
    from poppy_django.maintenance import prune_by_retention

    report = prune_by_retention()
    return report.events if report else 0
