"""Handoffs waiting for a person: how many one personal agent may have, and in what order the
team sees them.

A personal agent's handoff puts a conversation in the desk's queue (``queued``), where it
takes a person's time and a place in every staffer's alerts. Without bounds one personal
agent fills the queue: one User asks for a person in a dozen conversations at once, or a
client asks for many fresh Users. So :func:`admit` bounds the waiting handoffs per User
(``MAX_WAITING_HANDOFFS_PER_USER``, the client's pairwise User) and per client
(``MAX_WAITING_HANDOFFS_PER_CLIENT``), counted under a lock per client so that concurrent
requests cannot all pass; a handoff past either is ``429 too_many_requests`` (the wire's
code for a bound, with ``Retry-After``) and counted (``poppy.handoffs.refused``).

The order is fair across personal agents (:func:`fair_order`): each waiting handoff's
:func:`client_turn` (1 for its client's longest-waiting one, 2 for the next, ...) comes
before the time it asked, so every client's first waits ahead of any client's second, and a
real customer is not queued behind a flood from one agent. The desk's queue, its alerts and
"next waiting" read this order.

This is the seam routing builds on (who takes what, by load and capacity): ``client_turn``
is an annotation any queryset of conversations can carry, and ``fair_order`` the ordering
that puts it first; an assignment that picks the next handoff for a person reads the waiting
handoffs in that order.
"""

from __future__ import annotations

from typing import NoReturn

from django.db import models
from django.db.models import F, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce

from poppy_django.conf import poppy_settings
from poppy_django.errors import PoppyError
from poppy_django.models import Conversation
from poppy_django.observe import metrics
from poppy_django.store import backends, lifecycle

#: What a refused personal agent is told to wait before asking again: a person takes minutes.
RETRY_AFTER_SECONDS = 60


def admit(conversation: Conversation) -> None:
    """Let ``conversation``'s personal agent add one waiting handoff, or refuse it (``429
    too_many_requests``, counted). Call inside the transaction that queues it: the client's
    lock is held until it commits, so two requests count one after the other."""
    backends.for_writing(Conversation).serialize(f"poppy:handoffs:{conversation.client_id}")
    waiting = Conversation.objects.filter(
        lifecycle.QUEUED.q, client_id=conversation.client_id
    ).exclude(pk=conversation.pk)
    per_user = poppy_settings.MAX_WAITING_HANDOFFS_PER_USER
    if per_user is not None and waiting.filter(user_id=conversation.user_id).count() >= per_user:
        _refuse("user_waiting", f"At most {per_user} handoffs may wait for a person per User.")
    per_client = poppy_settings.MAX_WAITING_HANDOFFS_PER_CLIENT
    if per_client is not None and waiting.count() >= per_client:
        _refuse(
            "client_waiting",
            f"At most {per_client} handoffs may wait for a person per personal agent.",
        )


def _refuse(reason: str, description: str) -> NoReturn:
    metrics.handoff_refused(reason)
    raise PoppyError(
        "too_many_requests",
        f"{description} Ask again once one is answered.",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def client_turn() -> models.Case:
    """A waiting handoff's place among its own client's waiting handoffs (1: its longest
    waiting; 0 for a conversation that is not waiting). A correlated count rather than a
    window function, so that it sorts beside aggregates (PostgreSQL refuses a window in a
    ``GROUP BY``)."""
    earlier = Conversation.objects.filter(
        lifecycle.QUEUED.q, client_id=OuterRef("client_id")
    ).filter(
        Q(handoff_requested_at__lt=OuterRef("handoff_requested_at"))
        | Q(handoff_requested_at=OuterRef("handoff_requested_at"), id__lt=OuterRef("id"))
    )
    counted = earlier.order_by().values("client_id").annotate(n=models.Count("pk")).values("n")
    first = models.Value(1)
    return models.Case(
        models.When(
            lifecycle.QUEUED.q, then=Coalesce(models.Subquery(counted), models.Value(0)) + first
        ),
        default=models.Value(0),
        output_field=models.IntegerField(),
    )


def fair_order(queryset: QuerySet[Conversation]) -> QuerySet[Conversation]:
    """``queryset``'s waiting handoffs in fair order: each client's first before any
    client's second, then by the time they asked."""
    return (
        queryset.filter(lifecycle.QUEUED.q)
        .annotate(client_turn=client_turn())
        .order_by("client_turn", F("handoff_requested_at").asc(nulls_last=True), "id")
    )
