"""Customers who asked for a person and got nobody: the desk's *missed* list, and following
them up outside the conversation.

A handoff answered ``unavailable`` or ``missed`` (timed out, or given back) stays on the list
until someone follows it up: joining the conversation later (a reply into it joins it) takes
it off by itself; :func:`followed_up` takes it off for a follow-up made elsewhere (an e-mail,
a call: the company's own channel, which the ``handoff_missed`` signal can feed).
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet

from poppy_django.errors import PoppyError
from poppy_django.models import Conversation, DeskEvent, DeskEventKind
from poppy_django.service import desk_log, guards
from poppy_django.staff import handoffs
from poppy_django.store import event_log


def missed() -> QuerySet[Conversation]:
    """Conversations whose customer got nobody and whom no one followed up yet."""
    return Conversation.objects.filter(handoffs.missed())


@transaction.atomic
def followed_up(
    conversation_id: str, *, by: str, note: str = "", request_id: str | None = None
) -> DeskEvent:
    """``by`` followed the customer up outside the conversation (``note``: how): off the
    missed list, recorded on the desk. A closed conversation too (its customer is still
    owed an answer). Refused (``not_missed``) when it is not on the list."""
    guards.person(by)
    if not isinstance(note, str) or len(note) > desk_log.MAX_NOTE:
        raise PoppyError("invalid_request", f"note: at most {desk_log.MAX_NOTE} characters.")
    conversation = event_log.lock(conversation_id)
    if not handoffs.followed_up(conversation, by):
        raise PoppyError("not_missed", "No missed handoff of this conversation waits for it.")
    meta = guards.meta(request_id, by)
    return desk_log.record(
        conversation, DeskEventKind.FOLLOWED_UP, by=by, text=note.strip(), meta=meta
    )
