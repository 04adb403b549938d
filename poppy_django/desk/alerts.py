"""What every desk page is told about the queue: how many wait, and which, for its alerts.

Every desk page re-reads this when the desk's live channel nudges it: the count goes in the
tab's title for everyone; a conversation the page has not seen waiting before raises a
browser notification (and a sound, if the staffer turned it on) for the one it waits for
only, or, when it waits for no one in particular, for those available to take it (in the
rotation, :mod:`poppy_django.staff.routing`, and in its team). The server says which
(:meth:`Reader.alerted`): a supervisor watching the desk sees the count only. A handoff
about to go back to the Company Agent (``POPPY["HANDOFF_WARN_AT"]`` of its maximum wait)
warns the one it waits for. *Next waiting* opens the first in the queue's fair
order (each personal agent's longest waiting first, so one agent's flood of handoffs never
stands ahead of everyone else's).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from poppy_django.desk import missed, queue, wording
from poppy_django.models import Conversation, Status
from poppy_django.staff import routing
from poppy_django.staff.waiting import fair_order

#: The waiting conversations a page is told about (in the queue's fair order): enough for
#: the alerts, not the queue.
SHOWN = 20


@dataclass(frozen=True)
class Waiting:
    """One conversation waiting for a person, as an alert names it."""

    id: str
    who: str
    said: str
    since: str
    #: The teammate it waits for (the assign hook's or someone's choice); "" for anyone.
    assignee: str
    #: The team it is for ("" for the whole desk).
    team: str
    #: Seconds until the desk warns that it goes back (<= 0: now), and until it goes back
    #: (None: it waits for a person for ever).
    warn_in: float | None
    due_in: float | None


@dataclass(frozen=True)
class Reader:
    """The staff member a desk page's alerts are for."""

    username: str
    #: Available and in the rotation: a handoff waiting for anyone is theirs to take.
    takes_any: bool
    #: The teams they are in (:mod:`poppy_django.staff.teams`).
    teams: list[str]

    def alerted(self, item: Waiting) -> bool:
        """Whether ``item`` raises this staff member's alert (the rest see the count only):
        it waits for them, or for no one in particular and they take such (in its team)."""
        if item.assignee:
            return item.assignee == self.username
        return self.takes_any and (not item.team or item.team in self.teams)


def reader(username: str, *, available: bool, teams: list[str]) -> Reader:
    """``username`` as the alerts see them: supervisors out of the rotation (superusers and
    the reports' holders who did not opt in) take no handoff waiting for anyone."""
    return Reader(username, available and routing.in_rotation(username), teams)


@dataclass(frozen=True)
class Summary:
    count: int
    waiting: list[Waiting]


def summary() -> Summary:
    """The waiting conversations (count, and the queue's fair order: each personal agent's
    longest waiting first, then by the time they asked, :mod:`poppy_django.staff.waiting`)."""
    queued = Conversation.objects.filter(status=Status.QUEUED)
    rows = fair_order(queued).annotate(said=queue.last_said())
    now = timezone.now()
    return Summary(
        count=queued.count(),
        waiting=[
            Waiting(
                id=row.id,
                who=wording.who(row),
                said=wording.first_words(row.said),
                since=row.handoff_requested_at.isoformat() if row.handoff_requested_at else "",
                assignee=row.assignee,
                team=row.team,
                **_deadline(row.handoff_requested_at, now),
            )
            for row in rows[:SHOWN]
        ],
    )


def _deadline(requested_at: datetime | None, now: datetime) -> dict[str, float | None]:
    found = missed.deadline(requested_at)
    if found is None:
        return {"warn_in": None, "due_in": None}
    return {
        "warn_in": (found.warn_at - now).total_seconds(),
        "due_in": (found.due_at - now).total_seconds(),
    }
