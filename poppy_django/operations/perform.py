"""Performing confirmed operations in workers: at most once, whatever happens to a worker.

:func:`perform` is a plain function (the Celery task :func:`perform_operation_task` calls
it; so can any executor). It holds the operation's row lock for the whole performance
and runs the action tool in the same transaction that moves the operation to
``succeeded``/``failed`` and posts the outcome to its conversation:

- a worker that dies mid-action leaves nothing: PostgreSQL rolls the transaction back (the
  tool's database effects included), the row is unlocked and still ``in_progress``;
- :func:`recover` (each worker's recovery sweep, and ``poppy_reap``) performs such
  operations again — ``SKIP LOCKED``, so one being performed is never taken twice;
- attempts are counted in a transaction of their own before each run, so an operation whose
  worker dies every time ends ``failed`` after ``TURN_MAX_ATTEMPTS`` instead of looping.

Side effects outside the database are the tool's to make idempotent: ``ctx.call_key`` is
the operation id, stable across attempts.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from celery import shared_task
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from poppy_django import observe, signals
from poppy_django.agent import registry
from poppy_django.agent.actions import jsonable
from poppy_django.agent.tools import ActionFailed, ToolContext
from poppy_django.conf import poppy_settings
from poppy_django.engine.executors import ThreadExecutor
from poppy_django.engine.handover import Handover
from poppy_django.observe.task_requests import CorrelatedTask
from poppy_django.observe.tracing import task_headers
from poppy_django.operations import OutcomeUnknown, conversation
from poppy_django.operations.models import Operation, OperationState
from poppy_django.verifier import Actor

logger = logging.getLogger(__name__)


def dispatch_on_commit(operation_id: str) -> None:
    """Hand a just-confirmed operation to a worker once the confirmation commits.

    With Celery (``CeleryExecutor``, which waits on a broker) a task, published after the
    answer by this process's ``poppy-operations-handover`` thread, as a message's turn is
    (:mod:`poppy_django.engine.handover`): the confirmation is committed ``in_progress``, so
    the answer need not wait on the broker. With the in-process executor, its pool, at the
    commit. A lost dispatch is not lost work: the recovery sweep performs it.
    """
    if getattr(poppy_settings.EXECUTOR, "waits_on_broker", False) is True:
        transaction.on_commit(lambda: after_answer.submit(operation_id))
    else:
        transaction.on_commit(lambda: _dispatch_or_record(operation_id))


def dispatch_now(operation_id: str) -> None:
    """Hand an operation to a worker now (``poppy_reap``); a duplicate is harmless."""
    _dispatch(operation_id)


def _dispatch(operation_id: str) -> None:
    if poppy_settings.EXECUTOR is ThreadExecutor:
        # In-process: on the engine's database threads, like the turns' sync work.
        ThreadExecutor.start().database.submit(_perform_closing, operation_id)
        return
    # One try, no publish retries, as a turn's dispatch: the sweep performs a lost one. The
    # headers carry the confirming request's id and trace to the worker's lines.
    perform_operation_task.apply_async((operation_id,), retry=False, headers=task_headers())


def _dispatch_or_record(operation_id: str) -> BaseException | None:
    """:func:`_dispatch`, a failure recorded instead of raised; the error, if it failed."""
    try:
        _dispatch(operation_id)
    except Exception as exc:
        _not_dispatched(operation_id, exc)
        return exc
    return None


def _not_dispatched(operation_id: str, exc: BaseException) -> None:
    """A dispatch that failed (or, behind a failed one, was not tried): the sweep will."""
    logger.warning(
        "poppy: could not dispatch operation %s; the recovery sweep will",
        operation_id,
        exc_info=exc,
    )


#: This process's operation dispatches made after the answer.
after_answer = Handover(_dispatch_or_record, _not_dispatched, name="poppy-operations-handover")


def _perform_closing(operation_id: str) -> None:
    try:
        perform(operation_id)
    except Exception:
        logger.exception("poppy: performing operation %s failed", operation_id)
    finally:
        connection.close()


def perform(operation_id: str) -> bool:
    """Perform one confirmed operation if no other worker is on it; True if this call did."""
    close_old_connections()
    with transaction.atomic():  # counted before it runs: a worker dying every time gives up
        operation = _lock(operation_id)
        if operation is None:
            return False
        operation.attempts += 1
        operation.save(update_fields=["attempts", "updated_at"])
    if operation.attempts > poppy_settings.TURN_MAX_ATTEMPTS:
        return _finish_failed(
            operation_id,
            f"Nothing was changed: it could not be performed after {operation.attempts - 1} "
            "attempts.",
        )
    try:
        return _run(operation_id)
    except Exception as exc:
        logger.exception("poppy: operation %s failed", operation_id)
        return _finish_failed(
            operation_id, f"It could not be performed: {observe.describe_failure(exc)}"
        )


def _lock(operation_id: str) -> Operation | None:
    """The operation, row-locked, if it is in progress and no other worker holds it."""
    operation = (
        Operation.objects.select_for_update(skip_locked=True)
        .filter(pk=operation_id, state=OperationState.IN_PROGRESS, outcome_unknown=False)
        .first()
    )
    return operation


def _run(operation_id: str) -> bool:
    """Run the tool and record the outcome in one transaction: both happen, or neither."""
    with transaction.atomic():
        operation = _lock(operation_id)
        if operation is None:
            return False
        tool = registry.get(operation.agent_name).tool(operation.tool)
        if tool is None or tool.kind != "action":
            raise ActionFailed(f"the agent no longer has an action {operation.tool!r}")
        ctx = ToolContext(
            actor=Actor(id=operation.actor_id, account_id=operation.account_id),
            roles=frozenset(operation.roles),
            conversation_id=operation.conversation_id or "",
            page_context={"channel": "poppy_operations", "operation_id": operation_id},
            call_key=operation_id,
        )
        try:
            with transaction.atomic():
                result = tool.function(ctx, **tool.validate(operation.arguments))
            operation.state = OperationState.SUCCEEDED
            operation.result_summary = f"Done: {operation.summary}."
            operation.result_data = jsonable(result)
        except ActionFailed as exc:
            operation.state = OperationState.FAILED
            operation.result_summary = f"Nothing was changed: {exc or 'it failed'}."
        except OutcomeUnknown as exc:
            # Stays in progress, never performed again: the company settles it.
            operation.outcome_unknown = True
            operation.result_summary = str(exc) or "Whether it was done is not known yet."
            operation.save(update_fields=["outcome_unknown", "result_summary", "updated_at"])
            return True
        operation.save(update_fields=["state", "result_summary", "result_data", "updated_at"])
        told(operation)
    announce(operation)
    return True


def _finish_failed(operation_id: str, summary: str) -> bool:
    with transaction.atomic():
        operation = _lock(operation_id)
        if operation is None:
            return False
        operation.state = OperationState.FAILED
        operation.result_summary = summary
        operation.save(update_fields=["state", "result_summary", "updated_at"])
        told(operation)
    announce(operation)
    return True


def told(operation: Operation) -> None:
    """In the performing transaction: the proposing turn's record and conversation learn it."""
    conversation.settle_action_record(operation)
    conversation.post_outcome(operation)


def announce(operation: Operation) -> None:
    observe.moment(
        "action_executed",
        signals.action_executed,
        conversation_id=operation.conversation_id,
        tool=operation.tool,
        status=operation.state,
        summary=operation.summary,
    )


# -- recovery ------------------------------------------------------------------------------


def orphaned(grace_seconds: float | None = None) -> list[str]:
    """Confirmed operations no worker holds, unchanged for ``grace_seconds`` (LEASE_SECONDS):
    their dispatch was lost or their worker died."""
    grace = poppy_settings.LEASE_SECONDS if grace_seconds is None else grace_seconds
    before = timezone.now() - timedelta(seconds=grace)
    with transaction.atomic():
        return list(
            Operation.objects.select_for_update(skip_locked=True)
            .filter(state=OperationState.IN_PROGRESS, outcome_unknown=False, updated_at__lt=before)
            .order_by("updated_at")
            .values_list("pk", flat=True)[:100]
        )


def recover(stop: threading.Event | None = None) -> list[str]:
    """Perform every orphaned operation (the recovery sweep calls it); their ids."""
    performed: list[str] = []
    for operation_id in orphaned():
        if stop is not None and stop.is_set():
            break
        logger.warning("poppy: performing operation %s, left without a worker", operation_id)
        if perform(operation_id):
            performed.append(operation_id)
    return performed


@shared_task(
    name="poppy_django.perform_operation",
    acks_late=True,
    reject_on_worker_lost=True,
    base=CorrelatedTask,  # Celery's own "received" line names the ids
)
def perform_operation_task(operation_id: str) -> bool:
    """Perform a confirmed operation (a duplicate delivery finds it done). Celery finds it
    through :mod:`poppy_django.tasks`; its name is what queued messages carry."""
    return perform(operation_id)
