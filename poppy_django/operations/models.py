"""What the Operations extension keeps: one row per operation, one per revision it had.

An operation is a consequential action the company proposed and performs only once the
User confirmed one exact revision of it. The row is the at-most-once record: the worker
that performs it moves it from ``in_progress`` to a final state in the same transaction as
the action's own database effects, so a worker that dies mid-action leaves it
``in_progress`` and the next worker performs it (once).
"""

from __future__ import annotations

from typing import Any

from django.db import models

from poppy_django import addresses, ids
from poppy_django.operations.options import options
from poppy_django.verifier import local_issuer


class OperationState(models.TextChoices):
    PROPOSED = "proposed"
    #: Confirmed: a worker performs it (or its outcome is unknown and stays so).
    IN_PROGRESS = "in_progress"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


FINAL_STATES = frozenset(
    {
        OperationState.SUCCEEDED,
        OperationState.FAILED,
        OperationState.CANCELLED,
        OperationState.EXPIRED,
    }
)


class Operation(models.Model):
    """One proposed consequential action, its current revision, confirmation and result."""

    operation_id = models.CharField(primary_key=True, max_length=64, default=ids.new_operation_id)
    #: Who may read and confirm it: the personal agent and pairwise User, and (proposed
    #: signed in) the account.
    client_id = models.CharField(max_length=512)
    user_id = models.CharField(max_length=512)
    account_id = models.CharField(max_length=256, null=True, blank=True)
    #: The same action by the same owner while proposed is the same operation, whichever
    #: channel (conversation, API, MCP) proposes it.
    proposal_key = models.CharField(max_length=64, db_index=True)
    #: What performing it runs: the agent's action tool, its validated arguments, and the
    #: actor and roles it was proposed under (the worker runs it as those, nobody else).
    agent_name = models.CharField(max_length=128)
    tool = models.CharField(max_length=128)
    arguments = models.JSONField(default=dict)
    actor_id = models.CharField(max_length=256)
    roles = models.JSONField(default=list)
    #: The conversation that proposed it, if any: its outcome is posted there.
    conversation = models.ForeignKey(
        "poppy_django.Conversation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="operations",
    )
    #: The action record of the turn that proposed it (the desk lists actions by it).
    action_record = models.OneToOneField(
        "poppy_django.ActionRecord",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="operation",
    )
    revision = models.PositiveIntegerField(default=1)
    state = models.CharField(
        max_length=16, choices=OperationState.choices, default=OperationState.PROPOSED
    )
    summary = models.TextField()
    terms = models.JSONField(default=dict, blank=True)
    user_approval_required = models.BooleanField(default=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    confirmed_revision = models.PositiveIntegerField(null=True, blank=True)
    approved_by = models.CharField(max_length=32, blank=True, default="")
    confirmed_at = models.DateTimeField(null=True, blank=True)
    result_summary = models.TextField(blank=True, default="")
    result_data = models.JSONField(null=True, blank=True)
    #: Performances started by workers: bounded like a turn's attempts.
    attempts = models.PositiveSmallIntegerField(default=0)
    #: In progress with an outcome nobody knows yet (the tool raised OutcomeUnknown): no
    #: worker performs it again; :func:`~poppy_django.operations.service.settle` ends it.
    outcome_unknown = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["client_id", "user_id"], name="poppy_op_owner"),
            models.Index(fields=["state", "updated_at"], name="poppy_op_state"),
        ]

    def __str__(self) -> str:
        return f"{self.operation_id} r{self.revision} ({self.state})"

    def to_wire(self) -> dict[str, Any]:
        """The operation object of Operations v1 (§3): absent members are omitted, never null,
        except ``confirmation`` and ``result``, which are null until something happens."""
        wire: dict[str, Any] = {
            "operation_id": self.operation_id,
            "revision": self.revision,
            "state": self.state,
            "summary": self.summary,
            "user_approval_required": self.user_approval_required,
            "confirmation": None,
            "result": None,
        }
        if self.terms:
            wire["terms"] = self.terms
        url = page_url(self.operation_id)
        if url is not None:
            wire["url"] = url
        if self.state == OperationState.PROPOSED and self.expires_at is not None:
            wire["expires_at"] = _iso(self.expires_at)
        if self.confirmed_at is not None and self.confirmed_revision is not None:
            wire["confirmation"] = {
                "revision": self.confirmed_revision,
                "approved_by": self.approved_by,
                "confirmed_at": _iso(self.confirmed_at),
            }
        if self.state in FINAL_STATES:
            result: dict[str, Any] = {"summary": self.result_summary or self.state}
            if self.result_data is not None:
                result["data"] = self.result_data
            wire["result"] = result
        return wire


class OperationRevision(models.Model):
    """Each revision as it was proposed: what the User may have seen, kept for the record."""

    operation = models.ForeignKey(Operation, on_delete=models.CASCADE, related_name="revisions")
    revision = models.PositiveIntegerField()
    summary = models.TextField()
    terms = models.JSONField(default=dict, blank=True)
    #: Who revised it (empty for the proposal itself).
    revised_by = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["operation", "revision"]
        constraints = [
            models.UniqueConstraint(
                fields=["operation", "revision"], name="poppy_op_revision_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.operation_id} r{self.revision}"


def page_url(operation_id: str) -> str | None:
    """The operation's page on the website (``POPPY["OPERATIONS"]["PAGE_PATH"]``), if any."""
    path = options().page_path
    issuer = local_issuer.token_issuer()
    origin = addresses.configured_origin() or (addresses.origin_of(issuer) if issuer else None)
    if path is None or origin is None:
        return None
    return f"{origin}/{path}/{operation_id}"


def _iso(value: Any) -> str:
    return str(value.isoformat().replace("+00:00", "Z"))
