"""The desk's own log of a conversation and its tags: private notes, take-overs,
assignments, tags, macros run; never on the wire (tables of their own, which no read,
stream, MCP answer or export carries)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from poppy_django import fanout
from poppy_django.errors import PoppyError
from poppy_django.models import Conversation, DeskEvent, DeskEventKind
from poppy_django.service import guards
from poppy_django.store import event_log, tags

#: The longest private note.
MAX_NOTE = 10_000


def record(
    conversation: Conversation,
    kind: str,
    *,
    by: str,
    other: str = "",
    text: str = "",
    meta: dict[str, Any],
) -> DeskEvent:
    """Record a staff-only event of the locked conversation and tell the desk's browsers."""
    entry = DeskEvent.objects.create(
        conversation=conversation,
        kind=kind,
        by=by,
        other=other,
        text=text,
        after_seq=conversation.last_seq,
        request_id=meta.get("request_id", ""),
    )
    fanout.desk_news_on_commit(
        conversation.id,
        {
            "desk_event": entry.pk,
            "kind": kind,
            "by": by,
            "other": other,
            "assignee": conversation.assignee,
            "request_id": entry.request_id or None,
        },
    )
    return entry


@transaction.atomic
def add_note(
    conversation_id: str, text: str, *, by: str, request_id: str | None = None
) -> DeskEvent:
    """A private note between staff: on the desk only, never on the wire (not an event of
    the conversation's log, so no read, stream, MCP answer or export can carry it)."""
    guards.person(by)
    if not isinstance(text, str) or not text.strip():
        raise PoppyError("invalid_request", "A note needs text.")
    if len(text) > MAX_NOTE:
        raise PoppyError("invalid_request", f"A note is at most {MAX_NOTE} characters.")
    conversation = event_log.lock(conversation_id)
    return record(
        conversation, DeskEventKind.NOTE, by=by, text=text.strip(), meta=guards.meta(request_id, by)
    )


def desk_events(conversation_id: str, *, after: int = 0) -> list[DeskEvent]:
    """The conversation's notes, take-overs and assignments after the desk event ``after``
    (its ``pk``), oldest first: each sits after the log's event ``after_seq``."""
    return list(
        DeskEvent.objects.filter(conversation_id=conversation_id, pk__gt=after).order_by("pk")
    )


def log_event(
    conversation_id: str,
    kind: str,
    *,
    by: str,
    other: str = "",
    text: str = "",
    request_id: str | None = None,
) -> DeskEvent:
    """Record a staff-only event on the conversation's desk log (a macro's run, say), placed
    after its newest event, in the caller's transaction (the conversation locked)."""
    conversation = event_log.lock(conversation_id)
    return record(
        conversation, kind, by=by, other=other, text=text, meta=guards.meta(request_id, by)
    )


@transaction.atomic
def tag(
    conversation_id: str, names: list[str], *, by: str, request_id: str | None = None
) -> list[str]:
    """Tag the conversation (closed ones too: triage comes after): the tags it did not have,
    each a row of the desk's log (``tagged``). Tags are staff-only, never on the wire;
    anyone at the desk may tag, whoever has the conversation (``invalid_request`` for a
    name that cannot be a tag, before anything is written)."""
    guards.person(by)
    conversation = event_log.lock(conversation_id)
    added = tags.add(conversation, names, by=by)
    meta = guards.meta(request_id, by)
    for name in added:
        record(conversation, DeskEventKind.TAGGED, by=by, other=name, meta=meta)
    return added


@transaction.atomic
def untag(
    conversation_id: str, names: list[str], *, by: str, request_id: str | None = None
) -> list[str]:
    """Take tags off the conversation: the ones it had, each a row of the desk's log."""
    guards.person(by)
    conversation = event_log.lock(conversation_id)
    taken = tags.remove(conversation, names)
    meta = guards.meta(request_id, by)
    for name in taken:
        record(conversation, DeskEventKind.UNTAGGED, by=by, other=name, meta=meta)
    return taken


def tags_of(conversation_id: str) -> list[str]:
    """The conversation's tags, by name."""
    return tags.names_of(conversation_id)
