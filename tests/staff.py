"""A staff member writing through the service API, as the desk does: over the newest event."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from poppy_django import ids, service
from poppy_django.models import Event
from poppy_django.store import event_log


def staff_says(conversation_id: str, text: str, *, by: str = "sam", **options: Any) -> Event:
    """``by``'s message, having read everything (joining first when no one has it)."""
    seen = service.get(conversation_id).last_event_id
    return service.post_message(conversation_id, text, by=by, seen=seen, **options)


def company_message(
    conversation_id: str, text: str, *, data: dict[str, Any] | None = None
) -> Event:
    """A company message appended to the log itself (no owner, no turn, no state change): for
    the tests of reads, streams and pruning, which need events and nothing else."""
    with transaction.atomic():
        conversation = event_log.lock(conversation_id)
        return event_log.append_company_message(
            conversation,
            message_id=ids.new_company_message_id(),
            text=text,
            sender="human",
            data=data,
        )
