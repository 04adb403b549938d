"""A turn's consequential tool call, proposed as an Operation rather than performed.

The agent runtime asks its registered proposer (:func:`poppy_django.agent.actions.
register_proposer`, called from :mod:`poppy_django.operations.seams`) before running an
action: with the extension on and negotiated by the conversation's personal agent, a
flagged action is proposed here instead.
"""

from __future__ import annotations

from django.db import transaction

from poppy_django.agent.tools import Tool, ToolContext
from poppy_django.models import ActionRecord, ActionStatus, Conversation
from poppy_django.operations import service
from poppy_django.operations.models import Operation
from poppy_django.operations.options import enabled


class TurnProposer:
    """The :class:`~poppy_django.agent.actions.Proposer` of the Operations extension."""

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
        locked.status = ActionStatus.OPERATION_PROPOSED
        locked.save(update_fields=["status", "updated_at"])
    return locked
