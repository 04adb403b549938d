"""Running action tools at most once, whatever happens to the worker running the turn.

An action call is keyed by its turn and arguments. The tool runs in the same transaction
that marks its record succeeded or failed, so a worker killed mid-call leaves it pending
(and it runs when the turn is retried) and a worker killed after it leaves it decided (and
the retry reuses the outcome). Side effects outside the database are the tool's to make
idempotent, for example by passing ``ctx.call_key`` on as an idempotency key.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from poppy_django import observe, signals
from poppy_django.agent import proposals
from poppy_django.agent.guard import TurnGuard
from poppy_django.agent.tools import ActionFailed, Tool, ToolContext
from poppy_django.conf import poppy_settings
from poppy_django.models import ActionRecord, ActionStatus


@dataclass(frozen=True)
class ActionCall:
    conversation_id: str
    turn_id: str
    occurrence: int

    def key(self, tool: Tool, arguments: dict[str, Any]) -> str:
        canonical = json.dumps(
            [self.turn_id, tool.name, arguments, self.occurrence], sort_keys=True
        )
        return hashlib.sha256(canonical.encode()).hexdigest()[:40]


def propose(
    tool: Tool,
    arguments: dict[str, Any],
    ctx: ToolContext,
    call: ActionCall,
    guard: TurnGuard | None = None,
) -> ActionRecord:
    """Record the call (once) and decide it by the actions policy."""
    record, _ = ActionRecord.objects.get_or_create(
        conversation_id=call.conversation_id,
        call_key=call.key(tool, arguments),
        defaults={
            "tool": tool.name,
            "arguments": arguments,
            "summary": tool.describe_call(arguments),
            "actor_id": ctx.actor.id,
            "account_id": ctx.actor.account_id,
            "roles": sorted(ctx.roles),
        },
    )
    if record.status != ActionStatus.PENDING:
        return record  # decided before (a retried turn): never run twice
    if poppy_settings.ACTIONS == "reject":
        return _decide(record, ActionStatus.REJECTED)
    if tool.needs_approval:
        return _decide(record, ActionStatus.AWAITING_APPROVAL)
    proposer = proposals.proposer_for(tool, ctx)
    if proposer is not None:
        return proposer.propose(tool, record, ctx)
    return execute(tool, record, ctx, guard)


def _decide(record: ActionRecord, status: ActionStatus) -> ActionRecord:
    ActionRecord.objects.filter(pk=record.pk, status=ActionStatus.PENDING).update(status=status)
    record.refresh_from_db()
    _announce(record)
    return record


def _announce(record: ActionRecord) -> None:
    observe.moment(
        "action_executed",
        signals.action_executed,
        conversation_id=record.conversation_id,
        tool=record.tool,
        status=record.status,
        summary=record.summary,
    )


def execute(
    tool: Tool, record: ActionRecord, ctx: ToolContext, guard: TurnGuard | None = None
) -> ActionRecord:
    """Run a pending (or approved) action and record its outcome in one transaction.

    With a turn's ``guard``, the transaction commits only if the turn was not abandoned at
    its time limit meanwhile (an abandoned turn's action is rolled back, as if never run).
    """
    committing = guard.committing() if guard is not None else nullcontext(lambda: None)
    with committing as before_commit, transaction.atomic():
        locked = ActionRecord.objects.select_for_update().get(pk=record.pk)
        if locked.status not in (
            ActionStatus.PENDING,
            ActionStatus.AWAITING_APPROVAL,
            ActionStatus.APPROVED,
        ):
            return locked
        try:
            with transaction.atomic():
                result = tool.function(ctx, **locked.arguments)
            locked.status = ActionStatus.SUCCEEDED
            locked.result = jsonable(result)
        except ActionFailed as exc:
            locked.status = ActionStatus.FAILED
            locked.error = str(exc) or "failed"
        before_commit()
        locked.save(update_fields=["status", "result", "error", "updated_at"])
    _announce(locked)
    return locked


def jsonable(value: Any) -> Any:
    """A tool's result as JSON can hold it (anything else as its text)."""
    if value is None:
        return None
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)
