"""What the desk says of customers who got nobody, and of handoffs about to go back.

A missed customer's row says why (no one was available, it timed out, a staff member gave
it back) and when; a waiting handoff past ``POPPY["HANDOFF_WARN_AT"]`` of its maximum wait
says when it goes back to the Company Agent, so that its assignee (and the queue) can act
before it does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Subquery
from django.utils import timezone

from poppy_django.conf import poppy_settings
from poppy_django.desk import wording
from poppy_django.models import Conversation, HandoffOutcome, HandoffRecord
from poppy_django.staff import handoffs


@dataclass(frozen=True)
class Missed:
    """Why a customer got nobody, and when."""

    why: str
    at: datetime | None

    def __str__(self) -> str:
        return f"{self.why} ({wording.when(self.at)})" if self.at else self.why


def why(outcome: str, reason: str, staff: str) -> str:
    """A missed handoff's cause, in staff's words."""
    if outcome == HandoffOutcome.MISSED:
        waited = f" (it waited for {staff})" if staff else ""
        return f"Timed out: no one joined in time{waited}"
    if reason == "given back":
        return f"Given back by {staff}" if staff else "Given back"
    by = f" ({staff} said so)" if staff else ""
    return f"No one available: {reason}{by}" if reason else f"No one available{by}"


def row_annotations() -> dict[str, Subquery]:
    """The latest missed handoff's outcome, reason, staff and time on each conversation row
    (None where no customer waits for a follow-up)."""
    latest = handoffs.last_missed()
    return {
        f"missed_{name}": Subquery(latest.values(name)[:1])
        for name in ("outcome", "reason", "staff", "outcome_at")
    }


def of_row(row: Conversation) -> Missed | None:
    """The row's missed handoff (from :func:`row_annotations`)."""
    outcome = getattr(row, "missed_outcome", None)
    if not outcome:
        return None
    reason, staff = getattr(row, "missed_reason", ""), getattr(row, "missed_staff", "")
    return Missed(why(outcome, reason, staff), getattr(row, "missed_outcome_at", None))


def of(conversation: Conversation) -> Missed | None:
    """The conversation's latest missed handoff no one followed up yet."""
    record = (
        HandoffRecord.objects.filter(
            conversation=conversation, outcome__in=handoffs.NOBODY, followed_up_at__isnull=True
        )
        .order_by("-outcome_at", "-pk")
        .first()
    )
    if record is None:
        return None
    return Missed(why(record.outcome, record.reason, record.staff), record.outcome_at)


@dataclass(frozen=True)
class Deadline:
    """When a waiting handoff goes back to the Company Agent, and when the desk warns."""

    due_at: datetime
    warn_at: datetime

    def warning(self, now: datetime | None = None) -> bool:
        return (now or timezone.now()) >= self.warn_at


def deadline(requested_at: datetime | None) -> Deadline | None:
    """The deadline of a handoff asked for at ``requested_at`` (None without a maximum
    wait, or for a conversation not waiting)."""
    limit = poppy_settings.HANDOFF_MAX_WAIT_SECONDS
    if limit is None or requested_at is None:
        return None
    return Deadline(
        due_at=requested_at + timedelta(seconds=limit),
        warn_at=requested_at + timedelta(seconds=limit * poppy_settings.HANDOFF_WARN_AT),
    )
