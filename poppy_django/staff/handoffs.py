"""The record of each request for a person and what came of it (``HandoffRecord``): what
the support team's reports count (joined, missed, unavailable; first response and
resolution times; per staff member and per team).

Each function is called with the change it records, in its transaction, on the locked
conversation: the record and the change are one. A conversation has at most one open
record (waiting for a person, or with one who has not given it back yet).
"""

from __future__ import annotations

from django.utils import timezone

from poppy_django.models import Conversation, HandoffOutcome, HandoffRecord


def _open(conversation: Conversation) -> HandoffRecord | None:
    """The conversation's record still waiting for a person, or with one."""
    return (
        HandoffRecord.objects.filter(conversation=conversation, ended_at__isnull=True)
        .filter(outcome__in=[HandoffOutcome.WAITING, HandoffOutcome.JOINED])
        .order_by("-requested_at", "-pk")
        .first()
    )


def requested(
    conversation: Conversation, *, initiator: str, outcome: str, reason: str = ""
) -> HandoffRecord:
    """A handoff was asked for and answered ``outcome`` (waiting, joined or unavailable)."""
    now = timezone.now()
    return HandoffRecord.objects.create(
        conversation=conversation,
        initiator=initiator,
        requested_at=now,
        outcome=outcome,
        outcome_at=None if outcome == HandoffOutcome.WAITING else now,
        reason=reason,
        staff=conversation.assignee if outcome == HandoffOutcome.WAITING else "",
    )


def joined(conversation: Conversation, by: str) -> None:
    """``by`` joined: the waiting record is theirs; a person joining a conversation nobody
    handed off starts a record of its own (initiator ``staff``); a take-over changes none."""
    record = _open(conversation)
    now = timezone.now()
    if record is None:
        HandoffRecord.objects.create(
            conversation=conversation,
            initiator="staff",
            requested_at=now,
            outcome=HandoffOutcome.JOINED,
            outcome_at=now,
            staff=by,
        )
    elif record.outcome == HandoffOutcome.WAITING:
        record.outcome = HandoffOutcome.JOINED
        record.outcome_at = now
        record.staff = by
        record.save(update_fields=["outcome", "outcome_at", "staff"])


def responded(conversation: Conversation, by: str) -> None:
    """``by`` wrote to the customer: the first such message is the record's first response."""
    HandoffRecord.objects.filter(
        conversation=conversation,
        outcome=HandoffOutcome.JOINED,
        ended_at__isnull=True,
        first_response_at__isnull=True,
    ).update(first_response_at=timezone.now(), first_response_by=by)


def not_taken(conversation: Conversation, outcome: str, reason: str, *, by: str = "") -> None:
    """The waiting handoff was not taken: ``unavailable`` (a staff member said so: ``by``)
    or ``missed`` (it waited in vain: for its assignee, if it had one)."""
    record = _open(conversation)
    if record is None or record.outcome != HandoffOutcome.WAITING:
        return
    record.outcome = outcome
    record.outcome_at = timezone.now()
    record.reason = reason
    record.staff = by or conversation.assignee or record.staff
    record.save(update_fields=["outcome", "outcome_at", "reason", "staff"])


def ended(conversation: Conversation) -> HandoffRecord | None:
    """The person part ended (given back to the Company Agent, or closed); a handoff still
    waiting was cancelled by the conversation's closing. The record it ended."""
    record = _open(conversation)
    if record is None:
        return None
    now = timezone.now()
    if record.outcome == HandoffOutcome.WAITING:
        record.outcome = HandoffOutcome.CANCELLED
        record.outcome_at = now
    record.ended_at = now
    record.save(update_fields=["outcome", "outcome_at", "ended_at"])
    return record
