"""The desk's search: what was said (messages), private notes, staff, tags, a date, and the
conversation's ids; with a snippet of what matched for each row shown.

Staff only (every desk view checks the permission): notes are private, and a snippet may
quote one. Messages are searched as :meth:`StoreBackend.messages_saying` reads them
(PostgreSQL full-text, ``websearch_to_tsquery`` in the ``english`` configuration; elsewhere
a case-insensitive part of the text); notes as a case-insensitive part; a staff member by
their exact username (any case); a tag by its name; a date (``2026-12-05``) as the days the
conversation had an event, in the site's time zone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from poppy_django.models import (
    Conversation,
    ConversationTag,
    DeskEvent,
    DeskEventKind,
    Event,
    EventType,
    HandoffRecord,
)
from poppy_django.store import backends

#: PostgreSQL's text search configuration for searching what was said ("refunds" finds
#: "refund").
SEARCH_CONFIG = "english"
#: What encloses the match in a headline before it is escaped and shown (never in a text).
MARKS = ("\x02", "\x03")


@dataclass(frozen=True)
class Snippet:
    """What matched in one conversation: where (``Customer's agent said``, ``Note by sam``…)
    and its text in parts, each ``(text, matched)``: the template escapes them."""

    where: str
    parts: tuple[tuple[str, bool], ...]


def _day(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def _day_span(day: date) -> tuple[datetime, datetime]:
    start = timezone.make_aware(datetime.combine(day, time.min))
    return start, start + timedelta(days=1)


def condition(text: str, alias: str) -> Q:
    """The conversations ``text`` finds (for ``Conversation.objects.filter``)."""
    here = OuterRef("pk")
    found = Q(id__icontains=text) | Q(client_id__icontains=text) | Q(account_id__icontains=text)
    messages = Event.objects.filter(conversation=here, type=EventType.MESSAGE)
    found |= Q(Exists(backends.for_alias(alias).messages_saying(messages, text, SEARCH_CONFIG)))
    found |= Q(
        Exists(
            DeskEvent.objects.filter(
                conversation=here, kind=DeskEventKind.NOTE, text__icontains=text
            )
        )
    )
    found |= Q(assignee__iexact=text)
    found |= Q(Exists(DeskEvent.objects.filter(conversation=here, by__iexact=text)))
    found |= Q(
        Exists(
            HandoffRecord.objects.filter(conversation=here).filter(
                Q(staff__iexact=text) | Q(first_response_by__iexact=text)
            )
        )
    )
    found |= Q(Exists(ConversationTag.objects.filter(conversation=here, tag__name=text.lower())))
    day = _day(text)
    if day is not None:
        start, end = _day_span(day)
        found |= Q(
            Exists(
                Event.objects.filter(conversation=here, created_at__gte=start, created_at__lt=end)
            )
        )
    return found


def search(queryset: QuerySet[Conversation], text: str) -> QuerySet[Conversation]:
    """``queryset`` narrowed to what ``text`` finds (all of it for no text)."""
    text = text.strip()
    if not text:
        return queryset
    return queryset.filter(condition(text, queryset.db))


def _parts(headline: str) -> tuple[tuple[str, bool], ...]:
    """A headline's text split at its marks: ``(text, matched)`` pieces."""
    parts: list[tuple[str, bool]] = []
    for piece in headline.split(MARKS[0]):
        matched, _, rest = piece.partition(MARKS[1]) if MARKS[1] in piece else ("", "", piece)
        if matched:
            parts.append((matched, True))
        if rest:
            parts.append((rest, False))
    return tuple(parts)


def snippets(conversations: list[Conversation], text: str) -> dict[str, Snippet]:
    """For each of ``conversations`` (a queue page's rows), a snippet of what ``text``
    matched in it: a message, else a note, else a tag, a staff member or a day."""
    text = text.strip()
    if not text or not conversations:
        return {}
    alias = conversations[0]._state.db or "default"
    ids = [row.id for row in conversations]
    found: dict[str, Snippet] = {}
    messages = Event.objects.filter(conversation_id__in=ids, type=EventType.MESSAGE)
    for conversation_id, headline in backends.for_alias(alias).headlines(
        messages, text, SEARCH_CONFIG, MARKS
    ):
        found.setdefault(conversation_id, Snippet("Said", _parts(headline)))
    notes = DeskEvent.objects.filter(
        conversation_id__in=ids, kind=DeskEventKind.NOTE, text__icontains=text
    ).order_by("pk")
    for note in notes:
        marked = backends.marked(note.text, text, MARKS)
        found.setdefault(note.conversation_id, Snippet(f"Note by {note.by}", _parts(marked)))
    lowered = text.lower()
    tagged = ConversationTag.objects.filter(conversation_id__in=ids, tag__name=lowered)
    for conversation_id in tagged.values_list("conversation_id", flat=True):
        found.setdefault(conversation_id, Snippet("Tagged", ((lowered, True),)))
    day = _day(text)
    handled_by = _handled_by(ids, text)
    for row in conversations:
        if row.id in found:
            continue
        if row.assignee.lower() == lowered or row.id in handled_by:
            found[row.id] = Snippet("Handled by", ((text, True),))
        elif day is not None:
            found[row.id] = Snippet("Active on", ((day.isoformat(), True),))
    return found


def _handled_by(ids: list[str], username: str) -> set[str]:
    """Those of the conversations ``ids`` where the staff member ``username`` (any case)
    joined, answered, or wrote on the desk's log."""
    wrote = DeskEvent.objects.filter(conversation_id__in=ids, by__iexact=username)
    handled = HandoffRecord.objects.filter(conversation_id__in=ids).filter(
        Q(staff__iexact=username) | Q(first_response_by__iexact=username)
    )
    return set(wrote.values_list("conversation_id", flat=True)) | set(
        handled.values_list("conversation_id", flat=True)
    )
