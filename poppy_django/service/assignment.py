"""Sharing the work: a waiting handoff assigned to a teammate or to no one, a held
conversation transferred, and the queries of whose conversations are whose."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q, QuerySet

from poppy_django import observe, signals
from poppy_django.errors import PoppyError
from poppy_django.models import Conversation, DeskEventKind
from poppy_django.service import desk_log, guards
from poppy_django.staff import presence
from poppy_django.store import lifecycle


def assigned_moment(conversation: Conversation, *, previous: str, by: str, how: str) -> None:
    """The ``conversation_assigned`` moment: ``conversation.assignee`` has it now."""
    observe.moment(
        "conversation_assigned",
        signals.conversation_assigned,
        conversation_id=conversation.id,
        assignee=conversation.assignee,
        previous=previous,
        by=by,
        how=how,
    )


@transaction.atomic
def assign(
    conversation_id: str,
    to: str,
    *,
    by: str,
    note: str = "",
    request_id: str | None = None,
) -> None:
    """Give a handoff waiting for a person to the teammate ``to`` (with an optional note):
    they see it as theirs, and only they join it (others take it over).

    Refused when ``to`` is not on the desk (``unknown_staff``), and when the conversation is
    not waiting for a person (``not_waiting``: its holder transfers one they have).
    """
    guards.person(by)
    presence.staff_member(to)
    conversation = guards.lock_open(conversation_id)
    if not lifecycle.QUEUED(conversation):
        raise PoppyError(
            "not_waiting",
            "Only a conversation waiting for a person is assigned; its holder transfers it.",
        )
    previous = conversation.assignee
    if previous == to and not note:
        return
    lifecycle.give_to(conversation, to)
    meta = guards.meta(request_id, by)
    desk_log.record(conversation, DeskEventKind.ASSIGNED, by=by, other=to, text=note, meta=meta)
    assigned_moment(conversation, previous=previous, by=by, how="assigned")


@transaction.atomic
def unassign(conversation_id: str, *, by: str, request_id: str | None = None) -> None:
    """A waiting handoff back to no one in particular: whoever joins first takes it."""
    guards.person(by)
    conversation = guards.lock_open(conversation_id)
    if not lifecycle.QUEUED(conversation):
        raise PoppyError("not_waiting", "No handoff is waiting for a person.")
    previous = conversation.assignee
    if not previous:
        return
    lifecycle.give_to(conversation, "")
    meta = guards.meta(request_id, by)
    desk_log.record(conversation, DeskEventKind.UNASSIGNED, by=by, other=previous, meta=meta)
    assigned_moment(conversation, previous=previous, by=by, how="assigned")


@transaction.atomic
def transfer(
    conversation_id: str,
    to: str,
    *,
    by: str,
    note: str = "",
    request_id: str | None = None,
) -> None:
    """``by``, who holds the conversation, gives it to the teammate ``to`` with a note: ``to``
    holds it from now on (the personal agent sees no change: a person still has it).

    Refused when ``to`` is not on the desk (``unknown_staff``) or is ``by``
    (``invalid_request``), when another staff member holds it (``held_by_other``), and when
    ``by`` does not hold it (``not_holder``).
    """
    guards.person(by)
    presence.staff_member(to)
    if to == by:
        raise PoppyError("invalid_request", "Transfer to someone else.")
    conversation = guards.lock_open(conversation_id)
    guards.refuse_if_held_by_other(conversation, by)
    if not lifecycle.holds(conversation, by):
        raise PoppyError("not_holder", "Join the conversation before transferring it.")
    lifecycle.give_to(conversation, to)
    meta = guards.meta(request_id, by)
    desk_log.record(conversation, DeskEventKind.TRANSFERRED, by=by, other=to, text=note, meta=meta)
    assigned_moment(conversation, previous=by, by=by, how="transferred")


def mine(username: str) -> QuerySet[Conversation]:
    """Open conversations with ``username``: held, or assigned to them and waiting."""
    return Conversation.objects.filter(lifecycle.HANDED_TO_PEOPLE.q, assignee=username)


def unassigned() -> QuerySet[Conversation]:
    """Handoffs waiting for a person that no one in particular has."""
    return Conversation.objects.filter(lifecycle.QUEUED.q, assignee="")


def waiting() -> QuerySet[Conversation]:
    """Handoffs waiting for a person, the longest waiting first."""
    return Conversation.objects.filter(lifecycle.QUEUED.q).order_by("handoff_requested_at", "pk")


def handed_to_people() -> Q:
    """Conversations with people or waiting for them (the states with an owner)."""
    return lifecycle.WITH_PEOPLE.q
