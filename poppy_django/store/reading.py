"""Reading a conversation's events: pages, cursors, and waiting without holding a thread.

A read after a cursor is an index range scan on ``(conversation, seq)``. A waiting reader
holds no thread and no database connection while it waits: it sleeps on a fan-out listener
and re-reads when nudged — by a publisher, or by the process's watchdog that catches lost
nudges every ``WAKE_FALLBACK_SECONDS`` with one query for all readers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from poppy_django import fanout, ids
from poppy_django.conf import poppy_settings
from poppy_django.errors import PoppyError
from poppy_django.models import Conversation, Event
from poppy_django.store import backends
from poppy_django.store.ownership import OWNER_FIELDS, owned
from poppy_django.threads import in_thread, release_request_thread
from poppy_django.verifier import Principal

#: A JSON read stays within 1 MiB: a page ends early rather than grow past it.
MAX_RESPONSE_BYTES = 1024 * 1024
#: Room for the read's other fields (conversation id, cursor, status...).
ENVELOPE_BYTES = 1024


def after_seq(conversation: Conversation, cursor: str | None) -> int:
    """The sequence number to read after; errors for cursors never issued or pruned."""
    if cursor is None:
        return 0
    seq = ids.parse_cursor(conversation.id, cursor)
    if seq is None or seq > conversation.last_seq:
        raise PoppyError("invalid_cursor", "This conversation never issued that cursor.")
    # The last pruned event's id misses nothing (it is where a read of a wholly pruned
    # conversation leaves off); any earlier one missed what was pruned after it.
    if seq < conversation.pruned_before_seq - 1:
        raise PoppyError("cursor_expired", "Those events were pruned: read from the beginning.")
    return seq


@dataclass(frozen=True)
class Page:
    conversation_id: str
    events: list[dict[str, Any]]
    cursor: str | None
    has_more: bool
    status: str
    responder: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "events": self.events,
            "cursor": self.cursor,
            "has_more": self.has_more,
            "status": self.status,
            "responder": self.responder,
        }


#: The conversation's columns a read needs: whose it is, its cursor checks, the page's state.
READ_FIELDS = (*OWNER_FIELDS, "status", "responder", "last_seq", "pruned_before_seq")
#: The event's columns its wire form needs (not ``meta``: company-side facts, never shown).
EVENT_FIELDS = ("conversation", "seq", "type", "payload", "created_at")


def read_state(conversation_id: str) -> Conversation:
    """The conversation's :data:`READ_FIELDS`, in one query (gone, e.g. deleted while a
    reader waited: ``conversation_not_found``)."""
    backend = backends.for_reading(Conversation)
    found = backend.fetch(
        Conversation, backend.sql.conversation_by_id(READ_FIELDS), [conversation_id]
    )
    if not found:
        raise PoppyError("conversation_not_found")
    return found[0]


def owned_state(principal: Principal, conversation_id: str) -> Conversation:
    """:func:`read_state` of a conversation ``principal`` owns: ownership and the cursor's
    checks in one query (what a stream needs before it starts)."""
    return owned(principal, conversation_id, read_state)


@dataclass(frozen=True)
class Snapshot:
    """A conversation's :data:`READ_FIELDS` and, when read with them, the events of its next
    page (up to ``PAGE_SIZE + 1`` after the cursor, none past its ``last_seq``)."""

    conversation: Conversation
    #: None: not read with the row (:func:`page_of` reads them).
    events: list[Event] | None = None


def snapshot(conversation_id: str, after: int) -> Snapshot:
    """The conversation's read state and, where the backend reads both at once (PostgreSQL),
    its events after ``after`` in the same statement: one snapshot, one round trip
    (``conversation_not_found`` if gone)."""
    conversation, events = backends.for_reading(Conversation).snapshot(
        conversation_id, after, poppy_settings.PAGE_SIZE + 1, READ_FIELDS, EVENT_FIELDS
    )
    if conversation is None:
        raise PoppyError("conversation_not_found")
    return Snapshot(conversation, events)


def owned_snapshot(principal: Principal, conversation_id: str, cursor: str | None) -> Snapshot:
    """:func:`snapshot` after ``cursor`` of a conversation ``principal`` owns: ownership, the
    cursor's checks (:func:`after_seq`, which the caller still runs) and the page's state
    and events in one query. A cursor that cannot be this conversation's reads the row alone:
    it is refused once the row says whose the conversation is."""
    after = 0 if cursor is None else ids.parse_cursor(conversation_id, cursor)
    if after is None:
        return Snapshot(owned_state(principal, conversation_id))
    taken: list[Snapshot] = []

    def row_and_events(conversation_id: str) -> Conversation:
        taken.append(snapshot(conversation_id, after))
        return taken[0].conversation

    owned(principal, conversation_id, row_and_events)
    return taken[0]


def _start_cursor(conversation: Conversation) -> str | None:
    """Where a read with no cursor and nothing to return leaves off: after the pruned events
    (a read always names a cursor, and every event is pruned only once there were some)."""
    if conversation.pruned_before_seq < 2:
        return None
    return ids.event_id(conversation.pk, conversation.pruned_before_seq - 1)


def page_of(state: Snapshot, after: int, cursor: str | None) -> Page:
    """Up to PAGE_SIZE events after ``after``; the cursor stays put when there are none.

    ``state`` holds :data:`READ_FIELDS` as one query read them, and the events when that
    query read them too. A state change and its ``last_seq`` are committed together, so the
    events up to that ``last_seq`` and that status and responder are one consistent
    snapshot: the events are read up to there (later events are the next read's), and not
    at all when nothing is after the cursor.
    """
    conversation = state.conversation
    limit = poppy_settings.PAGE_SIZE
    found = state.events if state.events is not None else []
    if state.events is None and after < conversation.last_seq:
        backend = backends.for_reading(Event)
        found = backend.fetch(
            Event,
            backend.sql.events_in_range(EVENT_FIELDS),
            [conversation.pk, after, conversation.last_seq, limit + 1],
        )
    return paged(conversation, [row.to_wire() for row in found[: limit + 1]], None, cursor)


def wire_size(event: dict[str, Any]) -> int:
    """An event's bytes in a page: its JSON as the response writes it, plus ", "."""
    return len(json.dumps(event)) + 2


def paged(
    conversation: Conversation,
    found: Sequence[dict[str, Any]],
    sizes: Sequence[int] | None,
    cursor: str | None,
) -> Page:
    """The page of ``found`` (the wire forms of up to PAGE_SIZE + 1 events after the cursor;
    ``sizes``: their :func:`wire_size`, when known) under ``conversation``'s state: it ends
    early rather than grow past 1 MiB, and ``has_more`` says whether events are left."""
    events: list[dict[str, Any]] = []
    size = ENVELOPE_BYTES
    for index, event in enumerate(found[: poppy_settings.PAGE_SIZE]):
        size += sizes[index] if sizes is not None else wire_size(event)
        if events and size > MAX_RESPONSE_BYTES:
            break  # the page ends early: a response stays within 1 MiB (wire)
        events.append(event)
    return Page(
        conversation_id=conversation.pk,
        events=events,
        cursor=events[-1]["id"] if events else cursor or _start_cursor(conversation),
        has_more=len(found) > len(events),
        status=conversation.status,
        responder=conversation.responder,
    )


def read_page(conversation_id: str, after: int, cursor: str | None) -> Page:
    """A page read afresh: one query on PostgreSQL; elsewhere one when nothing is after
    ``after``, two otherwise."""
    return page_of(snapshot(conversation_id, after), after, cursor)


async def read_waiting(conversation_id: str, after: int, cursor: str | None, wait: float) -> Page:
    """A page, held up to ``wait`` seconds until at least one event is after the cursor."""
    if wait <= 0:
        return await in_thread(read_page, conversation_id, after, cursor)
    deadline = time.monotonic() + wait
    release_request_thread()
    async with fanout.listen(conversation_id) as listener:
        # Subscribed before the first read: an event committed after it wakes the listener.
        page = await in_thread(read_page, conversation_id, after, cursor)
        listener.seen_seq = after  # what it has read: the watchdog wakes it past this
        while not page.events:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            nudged, _ = await listener.wait(remaining)
            if nudged:
                page = await in_thread(read_page, conversation_id, after, cursor)
    return page
