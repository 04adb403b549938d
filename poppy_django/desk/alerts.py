"""What every desk page is told about the queue: how many wait, and which, for its alerts.

Every desk page re-reads this when the desk's live channel nudges it: the count goes in the
tab's title, a conversation the page has not seen waiting before raises a browser
notification (and a sound, if the staffer turned it on), and *next waiting* opens the first
in the queue's fair order (each personal agent's longest waiting first, so one agent's
flood of handoffs never stands ahead of everyone else's).
"""

from __future__ import annotations

from dataclasses import dataclass

from poppy_django.desk import queue, wording
from poppy_django.models import Conversation, Status
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
    #: The teammate it waits for (the round robin's or someone's choice); "" for anyone.
    assignee: str


@dataclass(frozen=True)
class Summary:
    count: int
    waiting: list[Waiting]


def summary() -> Summary:
    """The waiting conversations (count, and the queue's fair order: each personal agent's
    longest waiting first, then by the time they asked, :mod:`poppy_django.staff.waiting`)."""
    queued = Conversation.objects.filter(status=Status.QUEUED)
    rows = fair_order(queued).annotate(said=queue.last_said())
    return Summary(
        count=queued.count(),
        waiting=[
            Waiting(
                id=row.id,
                who=wording.who(row),
                said=wording.first_words(row.said),
                since=row.handoff_requested_at.isoformat() if row.handoff_requested_at else "",
                assignee=row.assignee,
            )
            for row in rows[:SHOWN]
        ],
    )
