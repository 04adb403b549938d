"""The record of each request for a person and what came of it (``HandoffRecord``): what
the support team's reports count (joined, missed, unavailable; first response and
resolution times; per staff member and per team).

Each function is called with the change it records, in its transaction, on the locked
conversation: the record and the change are one. A conversation has at most one open
record (waiting for a person, or with one who has not given it back yet).

A handoff no one took (``unavailable`` at once, or ``missed``: timed out or given back) is a
customer who asked for a person and got nobody: it stays on the desk's *missed* list until
someone follows it up, by joining the conversation later or by marking it followed up
elsewhere (the company's own channel, which the ``handoff_missed`` signal feeds).
"""

from __future__ import annotations

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from poppy_django import observe, signals
from poppy_django.models import Conversation, HandoffOutcome, HandoffRecord

#: The outcomes of a customer who asked for a person and got nobody.
NOBODY = (HandoffOutcome.UNAVAILABLE, HandoffOutcome.MISSED)


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
    record = HandoffRecord.objects.create(
        conversation=conversation,
        initiator=initiator,
        requested_at=now,
        outcome=outcome,
        outcome_at=None if outcome == HandoffOutcome.WAITING else now,
        reason=reason,
        staff=conversation.assignee if outcome == HandoffOutcome.WAITING else "",
        team=conversation.team,
    )
    if outcome in NOBODY:
        _missed_moment(conversation, record)
    return record


def joined(conversation: Conversation, by: str) -> None:
    """``by`` joined: the waiting record is theirs; a person joining a conversation nobody
    handed off starts a record of its own (initiator ``staff``); a take-over changes none."""
    record = _open(conversation)
    now = timezone.now()
    _not_followed_up(conversation).update(followed_up_at=now, followed_up_by=by)
    if record is None:
        HandoffRecord.objects.create(
            conversation=conversation,
            initiator="staff",
            requested_at=now,
            outcome=HandoffOutcome.JOINED,
            outcome_at=now,
            staff=by,
            team=conversation.team,
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


def given_to_team(conversation: Conversation, team: str) -> None:
    """The conversation was given to ``team``: its open record counts for that team."""
    HandoffRecord.objects.filter(pk__in=[r.pk for r in [_open(conversation)] if r]).update(
        team=team
    )


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
    _missed_moment(conversation, record)


def _missed_moment(conversation: Conversation, record: HandoffRecord) -> None:
    """The ``handoff_missed`` moment: a customer got nobody (for the company's own channel)."""
    observe.moment(
        "handoff_missed",
        signals.handoff_missed,
        conversation_id=conversation.id,
        outcome=record.outcome,
        reason=record.reason,
        staff=record.staff,
        team=record.team,
        private={"account_id": conversation.account_id or ""},
    )


def _not_followed_up(conversation: Conversation) -> QuerySet[HandoffRecord]:
    return HandoffRecord.objects.filter(
        conversation=conversation, outcome__in=NOBODY, followed_up_at__isnull=True
    )


def followed_up(conversation: Conversation, by: str) -> int:
    """``by`` followed the missed customer up outside the conversation: how many missed
    handoffs that settles (0: none waited for it)."""
    return _not_followed_up(conversation).update(followed_up_at=timezone.now(), followed_up_by=by)


def missed() -> Q:
    """Conversations with a customer who got nobody and whom no one followed up yet."""
    return Q(
        Exists(
            HandoffRecord.objects.filter(
                conversation=OuterRef("pk"), outcome__in=NOBODY, followed_up_at__isnull=True
            )
        )
    )


def last_missed() -> QuerySet[HandoffRecord]:
    """A conversation's (``OuterRef("pk")``) latest handoff no one took and no one followed
    up: for the queue's "why and when"."""
    return HandoffRecord.objects.filter(
        conversation=OuterRef("pk"), outcome__in=NOBODY, followed_up_at__isnull=True
    ).order_by("-outcome_at", "-pk")


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
