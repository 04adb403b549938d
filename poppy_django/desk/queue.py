"""The desk's queue: which conversations need a person, and in what order.

Conversations waiting for a person come first, in the fair order of
:mod:`poppy_django.staff.waiting` (each personal agent's longest waiting before any agent's
next, then the longest waiting first), then the rest, the most recently active first.

*Missed* holds the customers who asked for a person and got nobody, until someone follows
them up (:mod:`poppy_django.staff.handoffs`); a team's queue (``?team=``) the conversations
given to that team (:mod:`poppy_django.staff.teams`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import (
    Case,
    Count,
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

from poppy_django.desk import missed, search
from poppy_django.desk.wording import stalled_annotation
from poppy_django.models import (
    ActionStatus,
    Conversation,
    Event,
    EventType,
    Status,
    Tag,
)
from poppy_django.staff import handoffs
from poppy_django.staff.waiting import client_turn
from poppy_django.store import lifecycle


@dataclass(frozen=True)
class Filter:
    key: str
    label: str
    #: The rows it holds for the staff member (username) reading the queue.
    condition: Callable[[str], Q]


#: The queue's views, in the order the desk shows them; the first is the default. Each
#: state in it is a rule of the conversation's lifecycle, as the service's refusals ask it.
FILTERS: tuple[Filter, ...] = (
    Filter("open", "All open", lambda me: lifecycle.OPEN.q),
    Filter("mine", "Mine", lambda me: lifecycle.HANDED_TO_PEOPLE.q & Q(assignee=me)),
    Filter("waiting", "Waiting for a person", lambda me: lifecycle.QUEUED.q),
    Filter("unassigned", "Unassigned", lambda me: lifecycle.QUEUED.q & Q(assignee="")),
    Filter("missed", "Missed", lambda me: handoffs.missed()),
    Filter(
        "with_person",
        "With a person",
        lambda me: (lifecycle.PERSON_HOLDS & lifecycle.OPEN).q,
    ),
    Filter("working", "Agent working", lambda me: lifecycle.WORKING.q),
    Filter("idle", "Agent idle", lambda me: (lifecycle.IDLE & lifecycle.AGENT_RESPONDS).q),
    Filter(
        "approvals",
        "Actions to approve",
        lambda me: Q(actions__status=ActionStatus.AWAITING_APPROVAL) & lifecycle.OPEN.q,
    ),
    Filter("closed", "Closed", lambda me: lifecycle.CLOSED.q),
)
FILTERS_BY_KEY = {item.key: item for item in FILTERS}
#: Rows on one queue page: a desk that needs more is a desk that needs more people.
LIMIT = 200


def chosen_filter(key: str | None) -> Filter:
    return FILTERS_BY_KEY.get(key or "", FILTERS[0])


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


def conversations(
    filter_key: str | None = None,
    text: str = "",
    *,
    me: str = "",
    tag: str = "",
    team: str = "",
) -> QuerySet[Conversation]:
    """The queue's rows: filtered (and by ``tag``, and ``team``), searched, waiting first
    (in fair order: each personal agent's longest waiting before any agent's next, then the
    oldest first, :mod:`poppy_django.staff.waiting`), then by activity.

    Each row also carries the customer's last message (``last_said``, for its first words),
    whether it waits for a worker none has taken it up (``stalled``), its tags, and its
    missed handoff's why and when (``missed_*``, :mod:`.missed`)."""
    chosen = chosen_filter(filter_key)
    ids = Conversation.objects.filter(chosen.condition(me)).values("pk")
    queryset = search.search(Conversation.objects.filter(pk__in=ids), text)
    if tag:
        queryset = queryset.filter(tagging__tag__name=tag)
    if team:
        queryset = queryset.filter(team=team)
    return (
        queryset.annotate(
            waiting=Case(
                When(lifecycle.QUEUED.q, then=Value(0)),
                default=Value(1),
                output_field=IntegerField(),
            ),
            client_turn=client_turn(),
            approvals=Count("actions", filter=Q(actions__status=ActionStatus.AWAITING_APPROVAL)),
            last_said=last_said(),
            stalled=stalled_annotation(),
            **missed.row_annotations(),
        )
        .prefetch_related("tags")
        .order_by(
            "waiting",
            "client_turn",
            F("handoff_requested_at").asc(nulls_last=True),
            "-updated_at",
            "id",
        )
    )


def counts(me: str = "") -> dict[str, int]:
    """How many conversations each filter holds for ``me`` (for the desk's tabs), in one
    query. Distinct ids, because a filter on actions joins a row per action.
    """
    return Conversation.objects.aggregate(
        **{item.key: Count("pk", filter=item.condition(me), distinct=True) for item in FILTERS}
    )


def team_counts(names: list[str]) -> list[tuple[str, int]]:
    """Each team with how many open conversations it has (the queue's team filter)."""
    found = dict(
        Conversation.objects.filter(lifecycle.OPEN.q, team__in=names)
        .values("team")
        .annotate(n=Count("pk"))
        .values_list("team", "n")
    )
    return [(name, found.get(name, 0)) for name in names]


def tag_counts() -> list[tuple[str, int]]:
    """Every tag with how many open conversations have it (the queue's tag filter)."""
    return list(
        Tag.objects.annotate(
            open=Count("tagging", filter=~Q(tagging__conversation__status=Status.CLOSED))
        )
        .order_by("name")
        .values_list("name", "open")
    )
