"""The conversation as the desk shows it: the page's buttons and notices follow this, never
what the page guesses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import Http404

from poppy_django import service
from poppy_django.agent import proposals
from poppy_django.agent.proposals import StaffNote
from poppy_django.desk import missed, wording
from poppy_django.models import ActionRecord, Conversation, Status


def conversation_or_404(conversation_id: str) -> Conversation:
    try:
        return Conversation.objects.get(pk=conversation_id)
    except Conversation.DoesNotExist as exc:
        raise Http404("No such conversation.") from exc


def conversation_state(conversation: Conversation) -> dict[str, Any]:
    """The conversation's state for the page (staff-only fields included)."""
    requested = conversation.handoff_requested_at
    missed_one = missed.of(conversation)
    return {
        "id": conversation.id,
        "status": conversation.status,
        "status_label": wording.status_label(conversation.status, conversation.responder),
        "stalled": wording.stalled(conversation.id),
        "responder": conversation.responder,
        # Whom it is with: its holder, or the teammate it is assigned to while it waits.
        "assignee": service.holder(conversation),
        "why": wording.why(conversation),
        "handoff_requested_at": requested.isoformat() if requested else None,
        "handoff_requested_display": wording.when(requested),
        "last_seq": conversation.last_seq,
        "direct": conversation.is_direct,
        "closed": conversation.status == Status.CLOSED,
        "tags": service.tags_of(conversation.id),
        "team": conversation.team,
        # A customer who got nobody and whom no one followed up yet: why, and when.
        "missed": str(missed_one) if missed_one else "",
    }


@dataclass(frozen=True)
class LoggedAction:
    """One row of the page's action log: the action, and what staff read of its proposal
    when a part proposed it instead of running it (:mod:`poppy_django.agent.proposals`)."""

    record: ActionRecord
    note: StaffNote | None


def action_log(conversation_id: str) -> list[LoggedAction]:
    """The conversation's latest actions, newest first (the page's action log)."""
    records = list(
        ActionRecord.objects.filter(conversation_id=conversation_id).order_by("-created_at")[:50]
    )
    notes = proposals.staff_notes(records)
    return [LoggedAction(record, notes.get(record.pk)) for record in records]
