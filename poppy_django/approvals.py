"""Staff decisions on actions that need approval, run by workers, posted back to the conversation.

A tool declared ``needs_approval=True`` is recorded ``awaiting_approval`` by the turn (its
text says so). A person then approves or rejects it at the desk:

- *reject* refuses it at once: it never runs, and the outcome is posted;
- *approve* records the decision (``approved``, with the desk's request id) and dispatches
  the conversation. A worker then runs the action under the conversation's lease — under
  the actor and roles recorded when it was proposed, never the staff member's — and posts
  its outcome in the same transaction as the action's own database effects: a worker that
  dies mid-action leaves it ``approved``, and the next worker runs it, so it runs at most
  once. The web request never runs a tool.

Either way the outcome is a company message carrying ``data.actions``, worded by
``POPPY["ACTION_FORMATTER"]`` exactly like a turn's (a message makes sense without data),
and it carries the decision's request id in ``Event.meta`` so the desk settles its row.

>>> from poppy_django import approvals
>>> approvals.approve(record_id, by="sam", request_id="4f1c...")
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import connections, router, transaction
from django.db.models import QuerySet

from poppy_django import dispatch, event_log, ids, leases, memory, observe, statements
from poppy_django.agent import actions, registry
from poppy_django.agent.outcomes import format_action
from poppy_django.agent.tools import Tool, ToolContext
from poppy_django.auth import Actor
from poppy_django.conf import poppy_settings
from poppy_django.errors import PoppyError
from poppy_django.models import (
    ActionRecord,
    ActionStatus,
    AgentThread,
    Conversation,
    Event,
    Status,
)

logger = logging.getLogger(__name__)


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
        if conversation.status == Status.CLOSED:
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
        if conversation.status != Status.CLOSED:
            _post_outcome(conversation, record, [])
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


def tool_context(record: ActionRecord, conversation: Conversation, *, by: str) -> ToolContext:
    """The context the tool runs in: the personal agent's actor and roles at proposal time."""
    return ToolContext(
        actor=Actor(id=record.actor_id, account_id=record.account_id),
        roles=frozenset(record.roles),
        conversation_id=conversation.id,
        page_context={"channel": "poppy_desk", "approved_by": by},
        call_key=record.call_key,
    )


# -- in the worker -------------------------------------------------------------------------


def approved_ids(conversation_id: str) -> list[int]:
    """The conversation's actions staff approved and no worker ran yet, oldest first."""
    with connections[router.db_for_write(ActionRecord)].cursor() as cursor:
        cursor.execute(statements.actions_in_status(), [conversation_id, ActionStatus.APPROVED])
        return [row[0] for row in cursor.fetchall()]


def run_approved(conversation_id: str, owner: str) -> None:
    """Run the conversation's approved actions; the caller holds the conversation's lease."""
    for record_id in approved_ids(conversation_id):
        _run_one(record_id, owner)


def _run_one(record_id: int, owner: str) -> None:
    with transaction.atomic():  # counted before it runs: a worker dying every time gives up
        record = ActionRecord.objects.select_for_update().get(pk=record_id)
        if record.status != ActionStatus.APPROVED:
            return
        record.attempts += 1
        record.save(update_fields=["attempts", "updated_at"])
    if record.attempts > poppy_settings.TURN_MAX_ATTEMPTS:
        _give_up(record_id, owner, f"it could not be run after {record.attempts - 1} attempts")
        return
    try:
        _execute(record_id, owner)
    except leases.LeaseLost:
        raise
    except Exception as exc:
        logger.exception("poppy: approved action %s failed", record_id)
        _give_up(record_id, owner, observe.describe_failure(exc))


def _execute(record_id: int, owner: str) -> None:
    """Run it, and post its outcome, in one transaction: both happen, or neither."""
    with transaction.atomic():
        record = ActionRecord.objects.select_for_update().get(pk=record_id)
        if record.status != ActionStatus.APPROVED:
            return
        conversation = Conversation.objects.get(pk=record.conversation_id)
        tool = _tool(conversation, record)
        ctx = tool_context(record, conversation, by=record.decided_by)
        record = actions.execute(tool, record, ctx)
        conversation = leases.lock_owned(conversation.id, owner)
        if conversation.status != Status.CLOSED:
            components = [component.to_wire() for component in ctx.components]
            _post_outcome(conversation, record, components)


def _give_up(record_id: int, owner: str, error: str) -> None:
    with transaction.atomic():
        record = ActionRecord.objects.select_for_update().get(pk=record_id)
        if record.status != ActionStatus.APPROVED:
            return
        record.status = ActionStatus.FAILED
        record.error = error
        record.save(update_fields=["status", "error", "updated_at"])
        conversation = leases.lock_owned(record.conversation_id, owner)
        if conversation.status != Status.CLOSED:
            _post_outcome(conversation, record, [])


def _tool(conversation: Conversation, record: ActionRecord) -> Tool:
    tool = registry.get(conversation.agent_name).tool(record.tool)
    if tool is None or tool.kind != "action":
        raise PoppyError("invalid_request", f"The agent no longer has an action {record.tool!r}.")
    if tool.missing_scope(frozenset(record.roles)) is not None:
        raise PoppyError(
            "invalid_request", "The roles recorded for this action no longer reach the tool."
        )
    return tool


def _remember(conversation: Conversation, record: ActionRecord, text: str) -> None:
    """Tell the Company Agent's thread what staff decided, so later turns know it."""
    thread = (
        AgentThread.objects.select_for_update()
        .filter(conversation_id=conversation.thread_root_id, actor_id=record.actor_id)
        .first()
    )
    if thread is not None:
        memory.append(thread, [{"role": "assistant", "text": text}])


def _post_outcome(
    conversation: Conversation, record: ActionRecord, components: list[dict[str, Any]]
) -> Event:
    outcome = record.to_wire()
    try:
        text = poppy_settings.ACTION_FORMATTER(outcome, poppy_settings.texts)
    except Exception:  # a broken formatter must not leave the decision untold
        logger.exception("poppy: ACTION_FORMATTER failed; using the default wording")
        text = format_action(outcome, poppy_settings.texts)
    data: dict[str, Any] = {"actions": [outcome]}
    if components:
        data["components"] = components
    meta: dict[str, Any] = {"by": record.decided_by, "action_record": record.pk}
    if record.request_id:
        meta["request_id"] = record.request_id
    _remember(conversation, record, text)
    return event_log.append_company_message(
        conversation,
        message_id=ids.new_company_message_id(),
        text=text,
        data=data,
        meta=meta,
    )
