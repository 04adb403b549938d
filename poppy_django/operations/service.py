"""Operations v1, company side: propose, revise, read, confirm, cancel — in the database.

Every channel goes through here, so an operation is the same whichever carried it:

- :func:`propose` records a proposal (revision 1, ``expires_at``). The same action by the
  same owner while still proposed is the same operation (Operations §4: an API's ``202``, a
  conversation message and an MCP tool's ``structuredContent`` name one ``operation_id``).
- :func:`revise` (the company: staff, a hook) makes a new revision: the old one can no
  longer be confirmed (``409 terms_changed`` with the current operation).
- :func:`confirm` is the one compare-and-set from ``proposed`` to ``in_progress``, for the
  exact ``revision`` the User approved; it dispatches the worker on commit
  (:mod:`poppy_django.operations.perform`). A repeated or late confirm returns the record
  unchanged — the action is performed at most once.
- :func:`read` / :func:`cancel` — a proposal past ``expires_at`` reads as ``expired``.

Ownership is checked on every call: another personal agent or User, or another account,
gets ``404 operation_not_found``, exactly as an unknown id; the same User signed out on an
account's operation gets ``403 sign_in_required``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from poppy_django import ids
from poppy_django.agent import registry
from poppy_django.agent.runtime import resolve_actor, roles_of
from poppy_django.agent.tools import Tool
from poppy_django.errors import PoppyError
from poppy_django.operations import conversation, negotiation, perform
from poppy_django.operations.models import Operation, OperationRevision, OperationState
from poppy_django.operations.options import options
from poppy_django.store import storable
from poppy_django.verifier import Actor, Principal

APPROVERS = ("user", "standing_permission")
#: A proposal's arguments as JSON, its summary, and the open proposals of one client's User.
MAX_ARGUMENTS_BYTES = 8 * 1024
MAX_SUMMARY_CHARS = 500
MAX_OPEN_PROPOSALS = 20
NOT_FOUND = "operation_not_found"


def not_found() -> PoppyError:
    return PoppyError(NOT_FOUND, "There is no such operation.")


def proposes(tool: Tool, client_id: str) -> bool:
    """Whether a call of ``tool`` for this personal agent proposes an Operation."""
    opts = options()
    if not opts.enabled or tool.kind != "action":
        return False
    if not (tool.operation or opts.propose == "all"):
        return False
    return negotiation.lists_operations(client_id)


def proposal_key(
    client_id: str, user_id: str, account_id: str | None, tool: str, arguments: dict[str, Any]
) -> str:
    canonical = json.dumps([client_id, user_id, account_id, tool, arguments], sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def propose(
    *,
    client_id: str,
    user_id: str,
    account_id: str | None,
    agent_name: str,
    tool: Tool,
    arguments: dict[str, Any],
    actor: Actor,
    roles: frozenset[str],
    conversation_id: str | None = None,
) -> Operation:
    """The proposed operation for this call: the one already proposed, or a new one.

    Bounded: arguments the database can keep and at most :data:`MAX_ARGUMENTS_BYTES` of JSON
    (``invalid_request``), a summary of at most :data:`MAX_SUMMARY_CHARS`, and at most
    :data:`MAX_OPEN_PROPOSALS` open proposals per client's User (``rate_limited``).
    """
    problem = storable.problem(arguments)
    if problem is not None or len(json.dumps(arguments, default=str)) > MAX_ARGUMENTS_BYTES:
        raise PoppyError("invalid_request", "The arguments cannot be proposed (too large?).")
    key = proposal_key(client_id, user_id, account_id, tool.name, arguments)
    now = timezone.now()
    with transaction.atomic():
        known = (
            Operation.objects.select_for_update()
            .filter(proposal_key=key, state=OperationState.PROPOSED, expires_at__gt=now)
            .order_by("-created_at")
            .first()
        )
        if known is not None:
            return known
        open_proposals = Operation.objects.filter(
            client_id=client_id, user_id=user_id, state=OperationState.PROPOSED, expires_at__gt=now
        )
        if open_proposals.count() >= MAX_OPEN_PROPOSALS:
            raise PoppyError(
                "rate_limited",
                "Too many open proposals: confirm or cancel some first.",
                headers={"Retry-After": "60"},
            )
        operation = Operation.objects.create(
            operation_id=ids.new_operation_id(),
            client_id=client_id,
            user_id=user_id,
            account_id=account_id,
            proposal_key=key,
            agent_name=agent_name,
            tool=tool.name,
            arguments=arguments,
            actor_id=actor.id,
            roles=sorted(roles),
            conversation_id=conversation_id,
            summary=tool.describe_call(arguments)[:MAX_SUMMARY_CHARS],
            terms=dict(arguments),
            user_approval_required=not tool.allows_standing_permission(arguments),
            expires_at=now + timedelta(seconds=options().lifetime_seconds),
        )
        OperationRevision.objects.create(
            operation=operation, revision=1, summary=operation.summary, terms=operation.terms
        )
    return operation


def propose_for(
    principal: Principal, tool_name: str, arguments: dict[str, Any], *, agent_name: str
) -> Operation:
    """An API's (or MCP tool's) proposal for a verified caller, gated like a conversation.

    Refused as a conversation refuses the tool: ``sign_in_required`` signed out, else
    ``insufficient_scope``; arguments the tool does not take are ``invalid_request``.
    """
    from pydantic import ValidationError

    tool = registry.get(agent_name).tool(tool_name)
    if tool is None or tool.kind != "action":
        raise PoppyError("not_found", f"There is no action {tool_name!r}.")
    roles = roles_of(principal)
    missing = tool.missing_scope(roles)
    if missing is not None:
        error = "insufficient_scope" if principal.signed_in else "sign_in_required"
        challenge = f'DPoP error="{error}"' + (f', scope="{missing}"' if missing else "")
        raise PoppyError(error, headers={"WWW-Authenticate": challenge})
    try:
        validated = tool.validate(arguments)
    except ValidationError as exc:
        raise PoppyError("invalid_request", f"Invalid arguments for {tool_name}.") from exc
    return propose(
        client_id=principal.client_id,
        user_id=principal.user_id,
        account_id=principal.account_id,
        agent_name=agent_name,
        tool=tool,
        arguments=validated,
        actor=resolve_actor(principal),
        roles=roles,
    )


def _lock_owned(principal: Principal, operation_id: str) -> Operation:
    """The caller's operation, row-locked, expired first if its time is up."""
    if not ids.is_valid_id(operation_id):
        raise not_found()
    operation = Operation.objects.select_for_update().filter(pk=operation_id).first()
    if operation is None or (operation.client_id, operation.user_id) != (
        principal.client_id,
        principal.user_id,
    ):
        raise not_found()
    if operation.account_id is not None and operation.account_id != principal.account_id:
        if not principal.signed_in:
            raise PoppyError("sign_in_required", "Sign in to the account of this operation.")
        raise not_found()
    _expire_if_due(operation)
    return operation


def _expire_if_due(operation: Operation) -> None:
    if (
        operation.state == OperationState.PROPOSED
        and operation.expires_at is not None
        and timezone.now() >= operation.expires_at
    ):
        operation.state = OperationState.EXPIRED
        operation.result_summary = "Nothing was changed; the proposal expired."
        operation.save(update_fields=["state", "result_summary", "updated_at"])
        _settle_action_record(operation)


def read(principal: Principal, operation_id: str) -> Operation:
    with transaction.atomic():
        return _lock_owned(principal, operation_id)


def confirm(principal: Principal, operation_id: str, body: Any) -> Operation:
    """Confirm ``body["revision"]`` as approved by ``body["approved_by"]``: at most once."""
    with transaction.atomic():
        operation = _lock_owned(principal, operation_id)
        if operation.state != OperationState.PROPOSED:
            return operation  # a repeated or late confirm: the record, unchanged
        if not isinstance(body, dict):
            raise PoppyError("invalid_request", "The body is a JSON object.")
        revision, approved_by = body.get("revision"), body.get("approved_by")
        if isinstance(revision, bool) or not isinstance(revision, int):
            raise PoppyError("invalid_request", "revision is the integer revision approved.")
        if approved_by not in APPROVERS:
            raise PoppyError("invalid_request", "approved_by is user or standing_permission.")
        missing = _missing_scope(operation, principal)
        if missing is not None:
            raise PoppyError(
                "insufficient_scope",
                f"Confirming this operation needs {missing}.",
                headers={"WWW-Authenticate": f'DPoP error="insufficient_scope", scope="{missing}"'},
            )
        if revision != operation.revision:
            raise PoppyError(
                "terms_changed",
                "The operation has a newer revision: show it to the User.",
                extra={"operation": operation.to_wire()},
            )
        if approved_by == "standing_permission" and operation.user_approval_required:
            raise PoppyError("user_approval_required", "This revision needs the User's approval.")
        operation.state = OperationState.IN_PROGRESS
        operation.confirmed_revision = operation.revision
        operation.approved_by = str(approved_by)
        operation.confirmed_at = timezone.now()
        operation.save(
            update_fields=[
                "state",
                "confirmed_revision",
                "approved_by",
                "confirmed_at",
                "updated_at",
            ]
        )
        perform.dispatch_on_commit(operation.operation_id)
    return operation


def _missing_scope(operation: Operation, principal: Principal) -> str | None:
    """The scope the confirming token lacks of those the proposal needed, if any."""
    tool = registry.get(operation.agent_name).tool(operation.tool)
    if tool is None:
        return None  # performing it fails and says so
    return tool.missing_scope(roles_of(principal))


def cancel(principal: Principal, operation_id: str) -> Operation:
    """A proposal becomes ``cancelled``; one in progress or final is returned as it is."""
    with transaction.atomic():
        operation = _lock_owned(principal, operation_id)
        if operation.state == OperationState.PROPOSED:
            operation.state = OperationState.CANCELLED
            operation.result_summary = "Nothing was changed; the proposal was cancelled."
            operation.save(update_fields=["state", "result_summary", "updated_at"])
            _settle_action_record(operation)
        return operation


def cancel_for_client(client_id: str, reason: str) -> int:
    """The company cancels every open proposal of a client (taking it down); ``reason`` is
    the outcome's summary the personal agent reads. How many were cancelled."""
    cancelled = 0
    with transaction.atomic():
        open_ones = Operation.objects.select_for_update().filter(
            client_id=client_id, state=OperationState.PROPOSED
        )
        for operation in open_ones:
            operation.state = OperationState.CANCELLED
            operation.result_summary = reason
            operation.save(update_fields=["state", "result_summary", "updated_at"])
            _settle_action_record(operation)
            cancelled += 1
    return cancelled


def revise(
    operation_id: str,
    *,
    summary: str | None = None,
    terms: dict[str, Any] | None = None,
    arguments: dict[str, Any] | None = None,
    by: str = "",
) -> Operation:
    """The company changes a proposal: a new revision, a new expiry, the old one refused.

    ``arguments`` (validated by the tool) change what performing it runs, and by default
    its terms and summary; ``terms``/``summary`` change only what the User is shown. In a
    conversation, the new revision is posted there as a company message.
    """
    with transaction.atomic():
        operation = Operation.objects.select_for_update().filter(pk=operation_id).first()
        if operation is None:
            raise not_found()
        _expire_if_due(operation)
        if operation.state != OperationState.PROPOSED:
            raise PoppyError(
                "operation_not_proposed",
                f"Only a proposed operation can be revised; this one is {operation.state}.",
            )
        if arguments is not None:
            tool = registry.get(operation.agent_name).tool(operation.tool)
            if tool is None:
                raise PoppyError("invalid_request", f"The agent has no tool {operation.tool!r}.")
            operation.arguments = tool.validate(arguments)
            operation.terms = dict(operation.arguments)
            operation.summary = tool.describe_call(operation.arguments)
            operation.user_approval_required = not tool.allows_standing_permission(
                operation.arguments
            )
        if terms is not None:
            operation.terms = terms
        if summary is not None:
            operation.summary = summary
        operation.revision += 1
        operation.expires_at = timezone.now() + timedelta(seconds=options().lifetime_seconds)
        operation.save()
        OperationRevision.objects.create(
            operation=operation,
            revision=operation.revision,
            summary=operation.summary,
            terms=operation.terms,
            revised_by=by,
        )
        if operation.conversation_id is not None:
            conversation.post_revision(operation)
    return operation


def settle(operation_id: str, *, succeeded: bool, summary: str, data: Any = None) -> Operation:
    """The company learned the outcome of an operation whose outcome was unknown
    (:class:`~poppy_django.operations.OutcomeUnknown`): it becomes ``succeeded`` or
    ``failed`` with ``summary`` (what happened), told to its conversation like any outcome.

    Only such an operation can be settled (``409 operation_not_unknown`` otherwise): one a
    worker is performing, or one already final, is not the company's to overwrite.
    """
    with transaction.atomic():
        operation = Operation.objects.select_for_update().filter(pk=operation_id).first()
        if operation is None:
            raise not_found()
        if operation.state != OperationState.IN_PROGRESS or not operation.outcome_unknown:
            raise PoppyError(
                "operation_not_unknown",
                f"Only an operation whose outcome is unknown can be settled; this one is "
                f"{operation.state}.",
            )
        operation.state = OperationState.SUCCEEDED if succeeded else OperationState.FAILED
        operation.outcome_unknown = False
        operation.result_summary = summary
        operation.result_data = data
        operation.save(
            update_fields=[
                "state",
                "outcome_unknown",
                "result_summary",
                "result_data",
                "updated_at",
            ]
        )
        perform.told(operation)
    perform.announce(operation)
    return operation


def _settle_action_record(operation: Operation) -> None:
    """The proposing turn's action record follows the operation to its end (for the desk)."""
    conversation.settle_action_record(operation)
