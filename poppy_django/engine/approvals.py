"""Approved actions, run by workers and posted back to the conversation.

A tool declared ``needs_approval=True`` is recorded ``awaiting_approval`` by the turn; a
person decides at the desk (:mod:`poppy_django.desk.decisions`). An approved action is run
here, by a worker, under the conversation's lease — under the actor and roles recorded when
it was proposed, never the staff member's — and its outcome is posted in the same
transaction as the action's own database effects: a worker that dies mid-action leaves it
``approved``, and the next worker runs it, so it runs at most once. A conversation's web
request never runs a tool (the MCP server's read tools are the one exception, docs/mcp.md).

The outcome is a company message carrying ``data.actions``, worded by
``POPPY["ACTION_FORMATTER"]`` exactly like a turn's (a message makes sense without data),
and it carries the decision's request id in ``Event.meta`` so the desk settles its row.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from poppy_django import ids, observe
from poppy_django.agent import actions, memory, proposals, registry
from poppy_django.agent.outcomes import format_action
from poppy_django.agent.tools import Tool, ToolContext
from poppy_django.conf import poppy_settings
from poppy_django.errors import PoppyError
from poppy_django.models import ActionRecord, ActionStatus, AgentThread, Conversation, Event
from poppy_django.store import event_log, lifecycle
from poppy_django.verifier import Actor

logger = logging.getLogger("poppy_django.approvals")


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


def run_approved(conversation_id: str, owner: str) -> None:
    """Run the conversation's approved actions; the caller holds the conversation's lease."""
    for record_id in lifecycle.approved_action_ids(conversation_id):
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
    except lifecycle.LeaseLost:
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
        conversation = lifecycle.lock_owned(conversation.id, owner)
        if lifecycle.OPEN(conversation):
            components = [component.to_wire() for component in ctx.components]
            post_outcome(conversation, record, components)


def _give_up(record_id: int, owner: str, error: str) -> None:
    with transaction.atomic():
        record = ActionRecord.objects.select_for_update().get(pk=record_id)
        if record.status != ActionStatus.APPROVED:
            return
        record.status = ActionStatus.FAILED
        record.error = error
        record.save(update_fields=["status", "error", "updated_at"])
        conversation = lifecycle.lock_owned(record.conversation_id, owner)
        if lifecycle.OPEN(conversation):
            post_outcome(conversation, record, [])


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


def post_outcome(
    conversation: Conversation, record: ActionRecord, components: list[dict[str, Any]]
) -> Event:
    """Post a decided action's outcome as a company message (in the caller's transaction).

    While a person holds the conversation the Company Agent does not speak in it: the outcome
    of what staff decided is then said by the company's person side (``sender: human``).
    """
    outcome = proposals.outcome_of(record)
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
    held = lifecycle.PERSON_HOLDS(conversation)
    return event_log.append_company_message(
        conversation,
        message_id=ids.new_company_message_id(),
        text=text,
        sender="human" if held else "agent",
        data=data,
        meta=meta,
    )
