"""The Celery task that performs a confirmed operation (a duplicate delivery finds it done)."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="poppy_django.perform_operation", acks_late=True, reject_on_worker_lost=True)
def perform_operation_task(operation_id: str) -> bool:
    from poppy_django.operations.perform import perform

    return perform(operation_id)
