"""Operations in a conversation: the proposing message, revisions and outcomes posted there.

A conversation message carries the operation as the message's ``operation`` member (what
the public SDK reads: ``Message.operation``) and in ``data.operation``. A message never
confirms anything (Operations §5.1): confirmation happens at the operations endpoint only.
"""

from __future__ import annotations

import logging
from typing import Any

from poppy_django import ids
from poppy_django.agent.outcomes import format_action
from poppy_django.conf import poppy_settings
from poppy_django.models import ActionRecord, ActionStatus, Conversation, Status
from poppy_django.operations.models import Operation, OperationState
from poppy_django.store import event_log

logger = logging.getLogger(__name__)

#: The action record status an operation's final state settles to.
_RECORD_STATUS = {
    OperationState.SUCCEEDED: ActionStatus.SUCCEEDED,
    OperationState.FAILED: ActionStatus.FAILED,
    OperationState.CANCELLED: ActionStatus.REJECTED,
    OperationState.EXPIRED: ActionStatus.REJECTED,
}


def settle_action_record(operation: Operation) -> None:
    """The turn's action record of a final operation takes its outcome (the desk shows it)."""
    status = _RECORD_STATUS.get(OperationState(operation.state))
    if status is None or operation.action_record_id is None:
        return
    ActionRecord.objects.filter(pk=operation.action_record_id, status=ActionStatus.PROPOSED).update(
        status=status,
        result=operation.result_data,
        error=operation.result_summary if status == ActionStatus.FAILED else "",
    )


def post_revision(operation: Operation) -> None:
    """Tell the conversation the terms changed (caller holds the operation's row lock)."""
    text = poppy_settings.texts["operation_revised"].format(summary=operation.summary)
    _post(operation, text, {"operation": operation.to_wire()})


def post_outcome(operation: Operation) -> None:
    """Post a performed operation's outcome as an action outcome, with the operation."""
    outcome = {
        "tool": operation.tool,
        "status": ActionStatus.SUCCEEDED
        if operation.state == OperationState.SUCCEEDED
        else ActionStatus.FAILED,
        "summary": operation.summary,
    }
    if operation.result_data is not None:
        outcome["result"] = operation.result_data
    if operation.state != OperationState.SUCCEEDED:
        outcome["error"] = operation.result_summary
    try:
        text = poppy_settings.ACTION_FORMATTER(outcome, poppy_settings.texts)
    except Exception:  # a broken formatter must not leave the outcome untold
        logger.exception("poppy: ACTION_FORMATTER failed; using the default wording")
        text = format_action(outcome, poppy_settings.texts)
    _post(operation, text, {"actions": [outcome], "operation": operation.to_wire()})


def _post(operation: Operation, text: str, data: dict[str, Any]) -> None:
    if operation.conversation_id is None:
        return
    conversation: Conversation = event_log.lock(operation.conversation_id)
    if conversation.status == Status.CLOSED:
        return
    event_log.append_company_message(
        conversation,
        message_id=ids.new_company_message_id(),
        text=text,
        data=data,
        members={"operation": data["operation"]},
        meta={"operation": operation.operation_id, "revision": operation.revision},
    )
