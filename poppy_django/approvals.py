"""Staff decisions on actions that need approval, posted back to the conversation.

A tool declared ``needs_approval=True`` is recorded ``awaiting_approval`` by the turn (its
text says so). A person then approves it (it runs now, under the actor and roles recorded
when it was proposed, never the staff member's) or rejects it. Either way the outcome is
posted as a company message carrying ``data.actions``, worded by
``POPPY["ACTION_FORMATTER"]`` exactly like a turn's, so a message makes sense without data.

The decision, the action's effects and the message commit in one transaction under the
conversation's lock: two people deciding at once give one outcome and one message.

>>> from poppy_django import approvals
>>> approvals.approve(record_id, by="sam", request_id="4f1c...")
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from poppy_django import event_log, handoff
from poppy_django.agent import actions, registry
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

#: The status of a refusal to decide an action that is no longer awaiting a decision.
DECIDED_STATUS = 409


def awaiting(conversation_id: str | None = None) -> QuerySet[ActionRecord]:
    """Actions waiting for a person, oldest first (of one conversation, or all)."""
    records = ActionRecord.objects.filter(status=ActionStatus.AWAITING_APPROVAL)
    if conversation_id is not None:
        records = records.filter(conversation_id=conversation_id)
    return records.order_by("created_at", "pk")


def approve(record_id: int, *, by: str, request_id: str | None = None) -> ActionRecord:
    """Run the action now under its recorded actor and roles; post the outcome."""
    return _decide(record_id, approved=True, by=by, request_id=request_id)


def reject(record_id: int, *, by: str, request_id: str | None = None) -> ActionRecord:
    """Refuse the action (it never runs); post the outcome."""
    return _decide(record_id, approved=False, by=by, request_id=request_id)


def tool_context(record: ActionRecord, conversation: Conversation, *, by: str) -> ToolContext:
    """The context the tool runs in: the personal agent's actor and roles at proposal time."""
    return ToolContext(
        actor=Actor(id=record.actor_id, account_id=record.account_id),
        roles=frozenset(record.roles),
        conversation_id=conversation.id,
        page_context={"channel": "poppy_desk", "approved_by": by},
    )


@transaction.atomic
def _decide(record_id: int, *, approved: bool, by: str, request_id: str | None) -> ActionRecord:
    try:
        conversation_id = ActionRecord.objects.values_list("conversation_id", flat=True).get(
            pk=record_id
        )
    except ActionRecord.DoesNotExist as exc:
        raise PoppyError("not_found", "There is no such action.") from exc
    conversation = event_log.lock(conversation_id)
    record = ActionRecord.objects.select_for_update().get(pk=record_id)
    if record.status != ActionStatus.AWAITING_APPROVAL:
        raise PoppyError(
            "action_decided",
            f"This action is already {record.status}.",
            status=DECIDED_STATUS,
        )
    components: list[dict[str, Any]] = []
    if approved:
        if conversation.status == Status.CLOSED:
            raise PoppyError("conversation_closed", "The conversation is closed; reject it.")
        tool = _tool(conversation, record)
        ctx = tool_context(record, conversation, by=by)
        record = actions.execute(tool, record, ctx)
        components = [component.to_wire() for component in ctx.components]
    else:
        record.status = ActionStatus.REJECTED
    record.decided_by = by
    record.save(update_fields=["status", "decided_by", "updated_at"])
    if conversation.status != Status.CLOSED:
        _post_outcome(conversation, record, components, by=by, request_id=request_id)
    return record


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
        thread.history = [*thread.history, {"role": "assistant", "text": text}]
        thread.save(update_fields=["history", "updated_at"])


def _post_outcome(
    conversation: Conversation,
    record: ActionRecord,
    components: list[dict[str, Any]],
    *,
    by: str,
    request_id: str | None,
) -> Event:
    outcome = record.to_wire()
    text = poppy_settings.ACTION_FORMATTER(outcome, poppy_settings.texts)
    data: dict[str, Any] = {"actions": [outcome]}
    if components:
        data["components"] = components
    meta: dict[str, Any] = {"by": by, "action_record": record.pk}
    if request_id:
        meta["request_id"] = request_id
    _remember(conversation, record, text)
    return event_log.append_company_message(
        conversation,
        message_id=handoff.new_company_message_id(),
        text=text,
        data=data,
        meta=meta,
    )
