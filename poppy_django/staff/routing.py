"""Who is given a handoff: by load, within capacity, supervisors only when they opt in, and
within the conversation's team.

The *candidates* for a handoff are the staff available now (a live desk, not away:
:mod:`.presence`) who are in the rotation and have room: their *load* (conversations waiting
for them or held by them) is under their *capacity* (their own ``StaffPresence.capacity``,
else ``POPPY["DESK_CAPACITY"]``; None: no limit). Supervisors (superusers, and those who see
the desk's reports) are in the rotation only when they opt in (``StaffPresence.in_rotation``):
opening the desk to watch it gives them nothing. A conversation for a team
(:mod:`.teams`) has that team's members only.

The default assign hook, :func:`least_loaded`, gives the handoff to the candidate with the
lowest load; among equals, the one whose last handoff is the oldest (a round robin), so a
team shares the work evenly.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.db.models import Count
from django.utils import timezone

from poppy_django.conf import poppy_settings
from poppy_django.models import Conversation, StaffPresence
from poppy_django.staff import presence, teams
from poppy_django.store import lifecycle

#: Those who see the desk's reports lead the team: supervisors, out of the rotation.
SUPERVISOR_PERMISSION = "poppy_django.view_desk_reports"
#: Before any handoff: the staff member never given one comes first among equals.
_NEVER = datetime.min.replace(tzinfo=UTC)


def is_supervisor(user: Any) -> bool:
    """Superusers and team leads (the reports' permission)."""
    return bool(user.is_superuser or user.has_perm(SUPERVISOR_PERMISSION))


def loads(usernames: Iterable[str]) -> dict[str, int]:
    """How many open conversations each of ``usernames`` has: waiting for them or held."""
    names = list(usernames)
    counted = dict(
        Conversation.objects.filter(lifecycle.HANDED_TO_PEOPLE.q, assignee__in=names)
        .values("assignee")
        .annotate(n=Count("pk"))
        .values_list("assignee", "n")
    )
    return {name: counted.get(name, 0) for name in names}


def capacity(row: StaffPresence | None) -> int | None:
    """How many conversations this staff member handles at once (None: no limit)."""
    if row is not None and row.capacity is not None:
        return row.capacity
    return poppy_settings.DESK_CAPACITY


def _rows(usernames: Iterable[str], *, lock: bool = False) -> dict[str, StaffPresence]:
    users = presence.staff_by_username(list(usernames))
    query = StaffPresence.objects.filter(user__in=users.values()).select_related("user")
    if lock:  # in the order of their keys: two handoffs at once never deadlock
        query = query.select_for_update(of=("self",)).order_by("pk")
    return {row.user.get_username(): row for row in query}


def _in_rotation(row: StaffPresence) -> bool:
    return row.in_rotation or not is_supervisor(row.user)


def in_rotation(username: str) -> bool:
    """Whether ``username`` takes handoffs waiting for anyone: a staff member, or a supervisor
    who opted in (the desk alerts them of such handoffs; the others see the count only)."""
    row = _rows([username]).get(username)
    return row is not None and _in_rotation(row)


def _with_room(rows: dict[str, StaffPresence]) -> list[str]:
    load = loads(rows)
    return [
        name
        for name, row in rows.items()
        if _in_rotation(row) and ((limit := capacity(row)) is None or load[name] < limit)
    ]


def candidates(team: str = "", *, excluding: str = "") -> list[str]:
    """The usernames who may be given a handoff for ``team`` ("" for the whole desk) now,
    sorted: available, in the rotation, with room, in the team (``excluding`` left out)."""
    names = [name for name in presence.available() if name != excluding]
    if team:
        members = teams.members(team)
        names = [name for name in names if name in members]
    return sorted(_with_room(_rows(names)))


def least_loaded(*, conversation_id: str, candidates: list[str]) -> str | None:
    """The default assign hook: the candidate with the lowest load, then the one whose last
    handoff is the oldest. Their presence rows are locked until the handoff commits, and
    their loads and capacities read again under the lock: two handoffs at once never take
    one person past their capacity."""
    rows = _rows(candidates, lock=True)
    room = _with_room(rows)
    if not room:
        return None
    load = loads(room)
    chosen = min(
        room, key=lambda name: (load[name], rows[name].last_assigned_at or _NEVER, rows[name].pk)
    )
    row = rows[chosen]
    row.last_assigned_at = timezone.now()
    row.save(update_fields=["last_assigned_at"])
    return chosen
