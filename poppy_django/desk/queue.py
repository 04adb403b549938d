"""The desk's queue: which conversations need a person, and in what order.

Conversations waiting for a person come first, the longest waiting first
(``handoff_requested_at``), then the rest, the most recently active first.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.fields.json import KT

from poppy_django.desk.wording import stalled_annotation
from poppy_django.models import ActionStatus, Conversation, Event, EventType, Responder, Status


@dataclass(frozen=True)
class Filter:
    key: str
    label: str
    condition: Q


#: The queue's views, in the order the desk shows them; the first is the default.
FILTERS: tuple[Filter, ...] = (
    Filter("open", "All open", ~Q(status=Status.CLOSED)),
    Filter("waiting", "Waiting for a person", Q(status=Status.QUEUED)),
    Filter("with_person", "With a person", Q(responder=Responder.HUMAN) & ~Q(status=Status.CLOSED)),
    Filter("working", "Agent working", Q(status=Status.WORKING)),
    Filter("idle", "Agent idle", Q(status=Status.IDLE, responder=Responder.AGENT)),
    Filter(
        "approvals",
        "Actions to approve",
        Q(actions__status=ActionStatus.AWAITING_APPROVAL) & ~Q(status=Status.CLOSED),
    ),
    Filter("closed", "Closed", Q(status=Status.CLOSED)),
)
FILTERS_BY_KEY = {item.key: item for item in FILTERS}
#: PostgreSQL's text search configuration for searching what was said ("refunds" finds
#: "refund").
SEARCH_CONFIG = "english"
#: Rows on one queue page: a desk that needs more is a desk that needs more people.
LIMIT = 200


def chosen_filter(key: str | None) -> Filter:
    return FILTERS_BY_KEY.get(key or "", FILTERS[0])


def search(queryset: QuerySet[Conversation], text: str) -> QuerySet[Conversation]:
    """By what was said (any message's text), or by conversation id, personal agent
    ``client_id`` or account (case-insensitive part)."""
    text = text.strip()
    if not text:
        return queryset
    by_id = Q(id__icontains=text) | Q(client_id__icontains=text) | Q(account_id__icontains=text)
    return queryset.filter(by_id | Q(Exists(_messages_saying(text, connections[queryset.db]))))


def _messages_saying(text: str, connection: BaseDatabaseWrapper) -> QuerySet[Event]:
    """The row's messages whose text matches: full-text on PostgreSQL (words, stemmed, as a
    web search box reads them), a case-insensitive part of the text elsewhere."""
    messages = Event.objects.filter(conversation=OuterRef("pk"), type=EventType.MESSAGE)
    if connection.vendor != "postgresql":
        return messages.filter(payload__message__text__icontains=text)
    from django.contrib.postgres.search import SearchQuery, SearchVector

    return messages.annotate(
        words=SearchVector(KT("payload__message__text"), config=SEARCH_CONFIG)
    ).filter(words=SearchQuery(text, search_type="websearch", config=SEARCH_CONFIG))


def last_said() -> Subquery:
    """The text of the row's last message from the customer's side (its personal agent or
    the User): what they asked, not the Company Agent's answer."""
    return Subquery(
        Event.objects.filter(
            conversation=OuterRef("pk"), type=EventType.MESSAGE, payload__message__role="user"
        )
        .order_by("-seq")
        .values(text=KT("payload__message__text"))[:1]
    )


def conversations(filter_key: str | None = None, text: str = "") -> QuerySet[Conversation]:
    """The queue's rows: filtered, searched, waiting first (oldest first), then by activity.

    Each row also carries the customer's last message (``last_said``, for its first words)
    and whether it waits for a worker none has taken it up (``stalled``)."""
    chosen = chosen_filter(filter_key)
    ids = Conversation.objects.filter(chosen.condition).values("pk")
    queryset = search(Conversation.objects.filter(pk__in=ids), text)
    return queryset.annotate(
        waiting=Case(
            When(status=Status.QUEUED, then=Value(0)), default=Value(1), output_field=IntegerField()
        ),
        approvals=Count("actions", filter=Q(actions__status=ActionStatus.AWAITING_APPROVAL)),
        last_said=last_said(),
        stalled=stalled_annotation(),
    ).order_by("waiting", F("handoff_requested_at").asc(nulls_last=True), "-updated_at", "id")


def counts() -> dict[str, int]:
    """How many conversations each filter holds (for the desk's tabs), in one query.

    Distinct ids, because a filter on actions joins a row per action.
    """
    return Conversation.objects.aggregate(
        **{item.key: Count("pk", filter=item.condition, distinct=True) for item in FILTERS}
    )
