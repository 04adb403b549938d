"""A turn's consequential tool call, proposed as an Operation rather than performed: the
extension's side of the core's proposals seam (:mod:`poppy_django.agent.proposals`,
registered from :mod:`poppy_django.operations.seams`).

The agent runtime asks it before running an action: with the extension on and negotiated by
the conversation's personal agent, a flagged action is proposed here instead; the record's
outcome and the reply carry the operation; a personal agent taken down has its open
operations cancelled.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from poppy_django.agent.proposals import StaffNote
from poppy_django.agent.tools import Tool, ToolContext
from poppy_django.models import ActionRecord, ActionStatus, Conversation
from poppy_django.operations import service
from poppy_django.operations.models import Operation
from poppy_django.operations.options import enabled


class OperationProposals:
    """The :class:`~poppy_django.agent.proposals.Proposals` of the Operations extension."""

    def proposes(self, tool: Tool, ctx: ToolContext) -> bool:
        """With the extension on and negotiated, a flagged action is proposed instead."""
        if not enabled():
            return False
        client_id = (
            Conversation.objects.filter(pk=ctx.conversation_id)
            .values_list("client_id", flat=True)
            .first()
        )
        return client_id is not None and service.proposes(tool, client_id)

    def propose(self, tool: Tool, record: ActionRecord, ctx: ToolContext) -> ActionRecord:
        return propose_in_turn(tool, record, ctx)

    def wire_members(self, record: ActionRecord) -> dict[str, Any]:
        """A proposed record's outcome carries its operation (the model's reverse relation:
        the operation points at the record)."""
        operation = Operation.objects.filter(action_record=record).first()
        return {} if operation is None else {"operation": operation.to_wire()}

    def message_members(self, outcomes: list[dict[str, Any]]) -> dict[str, Any]:
        """Operations v1 §4: the reply proposes the first operation among its outcomes."""
        proposed = [outcome["operation"] for outcome in outcomes if "operation" in outcome]
        return {"operation": proposed[0]} if proposed else {}

    def withdraw_for_client(self, client_id: str, reason: str) -> int:
        return service.cancel_for_client(client_id, reason)

    def staff_notes(self, records: list[ActionRecord]) -> dict[int, StaffNote]:
        """Each record's operation, its revision and its state, in one query."""
        linked = Operation.objects.filter(action_record__in=[record.pk for record in records])
        return {
            operation.action_record_id: StaffNote(
                "operation",
                operation.operation_id,
                f"operation {operation.operation_id}, revision {operation.revision}: "
                f"{operation.state}",
            )
            for operation in linked
            if operation.action_record_id is not None
        }


def propose_in_turn(tool: Tool, record: ActionRecord, ctx: ToolContext) -> ActionRecord:
    """A turn's call of a consequential tool: an Operation proposed, linked to its record.

    The turn's reply then carries the operation (``message.operation``); nothing runs until
    the User confirms it at the operations endpoint.
    """
    conversation = Conversation.objects.get(pk=ctx.conversation_id)
    with transaction.atomic():
        locked = ActionRecord.objects.select_for_update().get(pk=record.pk)
        if locked.status != ActionStatus.PENDING:
            return locked
        operation = service.propose(
            client_id=conversation.client_id,
            user_id=conversation.user_id,
            account_id=conversation.account_id,
            agent_name=conversation.agent_name,
            tool=tool,
            arguments=locked.arguments,
            actor=ctx.actor,
            roles=ctx.roles,
            conversation_id=conversation.id,
        )
        if operation.action_record_id is None:
            Operation.objects.filter(pk=operation.pk).update(action_record=locked)
        locked.status = ActionStatus.PROPOSED
        locked.save(update_fields=["status", "updated_at"])
    return locked
