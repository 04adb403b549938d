"""Staff decisions on actions that need approval: approve (a worker then runs it) or reject.

- *reject* refuses it at once: it never runs, and the outcome is posted;
- *approve* records the decision (``approved``, with the desk's request id) and dispatches
  the conversation; a worker runs it (:mod:`poppy_django.engine.approvals`).

>>> from poppy_django.desk import decisions
>>> decisions.approve(record_id, by="sam", request_id="4f1c...")
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet

from poppy_django.engine import approvals, dispatch
from poppy_django.errors import PoppyError
from poppy_django.models import ActionRecord, ActionStatus, Conversation
from poppy_django.store import event_log, lifecycle


def awaiting(conversation_id: str | None = None) -> QuerySet[ActionRecord]:
    """Actions waiting for a person, oldest first (of one conversation, or all)."""
    records = ActionRecord.objects.filter(status=ActionStatus.AWAITING_APPROVAL)
    if conversation_id is not None:
        records = records.filter(conversation_id=conversation_id)
    return records.order_by("created_at", "pk")


def running(conversation_id: str) -> QuerySet[ActionRecord]:
    """Actions approved and not run yet: a worker is on them (the desk shows them so)."""
    return ActionRecord.objects.filter(
        conversation_id=conversation_id, status=ActionStatus.APPROVED
    ).order_by("created_at", "pk")


def approve(record_id: int, *, by: str, request_id: str | None = None) -> ActionRecord:
    """Record the approval and dispatch: a worker runs it and posts the outcome."""
    with transaction.atomic():
        conversation, record = _lock_awaiting(record_id)
        if lifecycle.CLOSED(conversation):
            raise PoppyError("conversation_closed", "The conversation is closed; reject it.")
        record.status = ActionStatus.APPROVED
        record.decided_by = by
        record.request_id = request_id or ""
        record.save(update_fields=["status", "decided_by", "request_id", "updated_at"])
        dispatch.dispatch_on_commit(conversation.id)
    return record


def reject(record_id: int, *, by: str, request_id: str | None = None) -> ActionRecord:
    """Refuse the action (it never runs); post the outcome."""
    with transaction.atomic():
        conversation, record = _lock_awaiting(record_id)
        record.status = ActionStatus.REJECTED
        record.decided_by = by
        record.request_id = request_id or ""
        record.save(update_fields=["status", "decided_by", "request_id", "updated_at"])
        if lifecycle.OPEN(conversation):
            approvals.post_outcome(conversation, record, [])
    return record


def _lock_awaiting(record_id: int) -> tuple[Conversation, ActionRecord]:
    """The record, then its conversation, locked (every path locks in this order)."""
    try:
        record = ActionRecord.objects.select_for_update().get(pk=record_id)
    except ActionRecord.DoesNotExist as exc:
        raise PoppyError("not_found", "There is no such action.") from exc
    conversation = event_log.lock(record.conversation_id)
    if record.status != ActionStatus.AWAITING_APPROVAL:
        raise PoppyError("action_decided", f"This action is already {record.status}.")
    return conversation, record
