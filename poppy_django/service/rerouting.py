"""Handoffs that must not wait for someone who is not there, and conversations given to a
team.

A handoff waiting for a staff member who goes away (:func:`reassign_from`, as they say so) or
has no live desk any more (:func:`reassign_stranded`, at every worker's sweep, once they have
been gone ``LEFT_GRACE_SECONDS``: a desk page closes as the next one opens) goes to someone
who is there (:mod:`poppy_django.staff.routing`'s choice, in its team), or to the queue for
whoever joins first when no one has room. A handoff that waits for no one because everyone
was full goes, at the sweep, to the first who has room again (:func:`assign_waiting`; not
one a person gave back to the queue on purpose).
Each change is recorded on the desk (``reassigned``, saying why) and sent as
``conversation_assigned`` (``how="reassigned"``).
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction
from django.db.models import Exists, OuterRef

from poppy_django import handoff
from poppy_django.errors import PoppyError
from poppy_django.models import Conversation, DeskEvent, DeskEventKind
from poppy_django.service import desk_log, guards
from poppy_django.service.assignment import assigned_moment
from poppy_django.staff import handoffs, presence, routing, teams
from poppy_django.staff.waiting import fair_order
from poppy_django.store import event_log, lifecycle

#: How long someone whose last desk page closed keeps their waiting handoffs: long enough
#: for a page moving to the next one to open its live connection again.
LEFT_GRACE_SECONDS = 10.0
WENT_AWAY = "went away"
LEFT = "left the desk"
ROOM = "someone has room for it"
#: The most waiting handoffs one sweep looks at for room.
SWEPT = 50


def _reassign_locked(conversation: Conversation, why: str) -> bool:
    """Give the locked waiting handoff to another candidate, or to no one; whether it
    changed hands."""
    previous = conversation.assignee
    to = handoff.assign_among(
        conversation, routing.candidates(conversation.team, excluding=previous)
    )
    if to == previous:
        return False  # waiting for no one, and still no one has room
    lifecycle.give_to(conversation, to)
    meta = guards.meta(None, "")
    desk_log.record(
        conversation,
        DeskEventKind.REASSIGNED,
        by=previous,
        other=to,
        text=f"{previous} {why}" if previous else why,
        meta=meta,
    )
    assigned_moment(conversation, previous=previous, by="", how="reassigned")
    return True


def _reassign_each(found: list[str], gone: Callable[[str], bool], why: str) -> list[str]:
    """Reassign each waiting handoff of ``found`` whose assignee is still ``gone`` (asked
    under the lock), one transaction each, skipping those another process has locked."""
    done = []
    for conversation_id in found:
        with transaction.atomic():
            locked = (
                Conversation.objects.select_for_update(skip_locked=True)
                .filter(pk=conversation_id)
                .values_list("pk", flat=True)
                .first()
            )
            if locked is None:
                continue
            conversation = event_log.lock(locked)
            if not lifecycle.QUEUED(conversation) or not gone(conversation.assignee):
                continue
            if _reassign_locked(conversation, why):
                done.append(conversation_id)
    return done


def reassign_from(username: str) -> list[str]:
    """``username`` went away: their waiting handoffs go to others (ids)."""
    waiting = Conversation.objects.filter(lifecycle.QUEUED.q, assignee=username)
    found = list(waiting.order_by("handoff_requested_at").values_list("pk", flat=True))
    return _reassign_each(
        found, lambda assignee: bool(username) and assignee == username, WENT_AWAY
    )


def reassign_stranded() -> list[str]:
    """Waiting handoffs whose assignee is away or has no live desk (gone longer than
    ``LEFT_GRACE_SECONDS``) go to others: the sweep's part (ids)."""
    here = set(presence.available(grace=LEFT_GRACE_SECONDS))
    waiting = Conversation.objects.filter(lifecycle.QUEUED.q).exclude(assignee="")
    stranded = waiting.exclude(assignee__in=here).order_by("handoff_requested_at")
    found = list(stranded.values_list("pk", flat=True))
    if not found:
        return []

    def gone(assignee: str) -> bool:  # asked again under each lock: they may be back
        return bool(assignee) and assignee not in presence.available(grace=LEFT_GRACE_SECONDS)

    return _reassign_each(found, gone, LEFT)


def assign_waiting() -> list[str]:
    """Handoffs waiting for no one in particular because no one had room go to whoever has
    room now, in the queue's fair order: the sweep's part (ids). Not those a person gave
    back to the queue (``unassigned`` since they asked); none when no one at all has room
    (with ``HANDOFF_HOOKS["assign"]`` None, the hook gives none)."""
    if not routing.candidates():
        return []
    waiting = fair_order(Conversation.objects.filter(assignee=""))
    given_back = DeskEvent.objects.filter(
        conversation=OuterRef("pk"),
        kind=DeskEventKind.UNASSIGNED,
        created_at__gte=OuterRef("handoff_requested_at"),
    )
    found = list(waiting.exclude(Exists(given_back)).values_list("pk", flat=True)[:SWEPT])
    done = []
    for conversation_id in found:  # one at a time: each changes the loads the next reads
        done += _reassign_each([conversation_id], lambda assignee: assignee == "", ROOM)
    return done


def reroute() -> None:
    """The sweep's part: stranded handoffs first, then those waiting for room."""
    reassign_stranded()
    assign_waiting()


@transaction.atomic
def to_team(
    conversation_id: str, team: str, *, by: str, note: str = "", request_id: str | None = None
) -> str:
    """Give the conversation to ``team`` (with an optional note): it is in the team's queue
    from now on, and with the least loaded of its members who has room (the one it is
    given to; "" when a waiting handoff found no one: it waits in the team's queue).

    Refused when ``team`` is not a team (``unknown_team``), when another staff member holds
    it (``held_by_other``), when it is neither waiting nor held by ``by`` (``not_holder``),
    and when no one of the team can take one that ``by`` holds (``team_unavailable``: a
    conversation a person holds needs one).
    """
    guards.person(by)
    teams.checked(team)
    if not team:
        raise PoppyError("unknown_team", "Name the team to give it to.")
    conversation = guards.lock_open(conversation_id)
    waiting = lifecycle.QUEUED(conversation)
    if not waiting:
        guards.refuse_if_held_by_other(conversation, by)
        if not lifecycle.holds(conversation, by):
            raise PoppyError("not_holder", "Join the conversation before giving it to a team.")
    previous = conversation.assignee
    if waiting:  # its own weight off whoever it waited for, before the loads are compared
        lifecycle.give_to(conversation, "")
    candidates = routing.candidates(team, excluding=previous if not waiting else "")
    to = handoff.assign_among(conversation, candidates)
    if not to and not waiting:
        raise PoppyError(
            "team_unavailable",
            f"No one of {team} is available to take it now: keep it, or give it to a person.",
        )
    lifecycle.give_to(conversation, to, team=team)
    handoffs.given_to_team(conversation, team)
    meta = guards.meta(request_id, by)
    desk_log.record(conversation, DeskEventKind.TO_TEAM, by=by, other=team, text=note, meta=meta)
    assigned_moment(conversation, previous=previous, by=by, how="transferred")
    return to
