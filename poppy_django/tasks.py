"""Celery tasks: turns, and the periodic maintenance a deployment schedules with beat."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="poppy_django.run_turns", acks_late=True, reject_on_worker_lost=True)
def run_turns_task(conversation_id: str) -> None:
    """Answer a conversation; a duplicate delivery finds the lease taken and returns."""
    from poppy_django.turns import run_turns

    run_turns(conversation_id)
