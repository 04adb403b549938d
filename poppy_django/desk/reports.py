"""The support team's reports, for the team lead: over a chosen period, how handoffs went
(joined, missed, unavailable), how fast people answered (first response) and how long they
kept the customer (resolution), and how customers rated the help (CSAT); for the whole
desk, per staff member and per team.

Read from the records written with each change (``HandoffRecord``, ``CsatSurvey``), so they
survive the events' pruning. A handoff counts in the period it was asked for in; a survey in
the period it was asked in. Times are medians and means in seconds:

- **first response**: from the request for a person to the first message a person wrote
  (handoffs a customer or the Company Agent asked for; a person who joined unasked starts
  no clock);
- **resolution**: from the request to the person part's end (given back, or closed).
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta

from django.utils import timezone

from poppy_django.errors import PoppyError
from poppy_django.models import CsatSurvey, HandoffOutcome, HandoffRecord

#: The outcomes shown, in the order shown.
OUTCOMES = (
    HandoffOutcome.JOINED,
    HandoffOutcome.MISSED,
    HandoffOutcome.UNAVAILABLE,
    HandoffOutcome.CANCELLED,
    HandoffOutcome.WAITING,
)
#: The longest period one report covers.
MAX_DAYS = 366
#: The period without one chosen: the last 7 days, today included.
DEFAULT_DAYS = 7
#: The most survey answers (rating, comment) the page lists.
ANSWERS_SHOWN = 20
#: Ratings that count as satisfied (Chatwoot's and most desks' CSAT: 4 and 5 of 5).
SATISFIED = (4, 5)


@dataclass(frozen=True)
class Period:
    """From the first day's start to the day after the last (the site's time zone)."""

    first: date
    last: date

    @property
    def start(self) -> datetime:
        return timezone.make_aware(datetime.combine(self.first, time.min))

    @property
    def end(self) -> datetime:
        return timezone.make_aware(datetime.combine(self.last + timedelta(days=1), time.min))

    def days(self) -> list[date]:
        return [self.first + timedelta(days=n) for n in range((self.last - self.first).days + 1)]


def period(first: str | None, last: str | None) -> Period:
    """The period ``first``..``last`` (ISO dates, both included); the last 7 days by default.
    ``invalid_request`` for a date that is not one, an end before the start, or more than a
    year."""
    today = timezone.localdate()
    try:
        end = date.fromisoformat(last) if last else today
        start = date.fromisoformat(first) if first else end - timedelta(days=DEFAULT_DAYS - 1)
    except ValueError as exc:
        raise PoppyError("invalid_request", "from and to are dates: YYYY-MM-DD.") from exc
    if end < start:
        raise PoppyError("invalid_request", "The period ends before it starts.")
    if (end - start).days >= MAX_DAYS:
        raise PoppyError("invalid_request", f"A report covers at most {MAX_DAYS} days.")
    return Period(start, end)


@dataclass(frozen=True)
class Durations:
    """Seconds: how many, their median and mean (None for none)."""

    count: int
    median: float | None
    mean: float | None

    @classmethod
    def of(cls, seconds: Iterable[float]) -> Durations:
        values = list(seconds)
        if not values:
            return cls(0, None, None)
        return cls(len(values), statistics.median(values), statistics.fmean(values))


@dataclass(frozen=True)
class Csat:
    """Surveys asked, answered, the mean rating and the share satisfied (4 or 5)."""

    asked: int
    answered: int
    mean: float | None
    satisfied: float | None
    #: How many answers gave each rating, 1 to 5.
    ratings: dict[int, int]

    @classmethod
    def of(cls, surveys: list[CsatSurvey]) -> Csat:
        ratings = [s.rating for s in surveys if s.rating is not None]
        counted = Counter(ratings)
        return cls(
            asked=len(surveys),
            answered=len(ratings),
            mean=statistics.fmean(ratings) if ratings else None,
            satisfied=(sum(counted[r] for r in SATISFIED) / len(ratings)) if ratings else None,
            ratings={rating: counted[rating] for rating in range(1, 6)},
        )


@dataclass(frozen=True)
class Figures:
    """One row of a report: the whole desk, a staff member or a team."""

    name: str
    handoffs: int
    outcomes: dict[str, int]
    first_response: Durations
    resolution: Durations
    csat: Csat


def figures(name: str, records: list[HandoffRecord], surveys: list[CsatSurvey]) -> Figures:
    """The figures of ``records`` (handoffs) and ``surveys``."""
    counted = Counter(record.outcome for record in records)
    return Figures(
        name=name,
        handoffs=len(records),
        outcomes={outcome: counted[outcome] for outcome in OUTCOMES},
        first_response=Durations.of(
            (r.first_response_at - r.requested_at).total_seconds()
            for r in records
            if r.first_response_at is not None and r.initiator != "staff"
        ),
        resolution=Durations.of(
            (r.ended_at - r.requested_at).total_seconds()
            for r in records
            if r.outcome == HandoffOutcome.JOINED and r.ended_at is not None
        ),
        csat=Csat.of(surveys),
    )


@dataclass
class Report:
    period: Period
    desk: Figures
    staff: list[Figures] = field(default_factory=list)
    teams: list[Figures] = field(default_factory=list)
    #: Per day: how many handoffs had each outcome.
    daily: list[tuple[date, dict[str, int]]] = field(default_factory=list)
    records: list[HandoffRecord] = field(default_factory=list)
    #: The period's answered surveys, the newest first (at most :data:`ANSWERS_SHOWN`).
    answers: list[CsatSurvey] = field(default_factory=list)


def report(chosen: Period) -> Report:
    """The report of ``chosen``: the desk, each staff member, each team, each day."""
    records = list(
        HandoffRecord.objects.filter(
            requested_at__gte=chosen.start, requested_at__lt=chosen.end
        ).order_by("requested_at", "pk")
    )
    surveys = list(CsatSurvey.objects.filter(asked_at__gte=chosen.start, asked_at__lt=chosen.end))
    by_staff: dict[str, list[HandoffRecord]] = defaultdict(list)
    for record in records:
        # A staff member's handoffs: those they joined, missed or gave back; and the ones
        # they answered first after a teammate joined.
        names = {record.staff, record.first_response_by} - {""}
        for name in names:
            by_staff[name].append(record)
    surveys_by_staff: dict[str, list[CsatSurvey]] = defaultdict(list)
    for survey in surveys:
        if survey.staff:
            surveys_by_staff[survey.staff].append(survey)
    by_team: dict[str, list[HandoffRecord]] = defaultdict(list)
    for record in records:
        by_team[record.team].append(record)
    surveys_by_team: dict[str, list[CsatSurvey]] = defaultdict(list)
    for survey in surveys:
        surveys_by_team[survey.team].append(survey)
    daily: dict[date, Counter[str]] = {day: Counter() for day in chosen.days()}
    for record in records:
        daily[timezone.localdate(record.requested_at)][record.outcome] += 1
    return Report(
        period=chosen,
        desk=figures("Whole desk", records, surveys),
        staff=[
            figures(name, by_staff.get(name, []), surveys_by_staff.get(name, []))
            for name in sorted(set(by_staff) | set(surveys_by_staff))
        ],
        teams=[
            figures(name or "No team", by_team.get(name, []), surveys_by_team.get(name, []))
            for name in sorted(set(by_team) | set(surveys_by_team))
        ],
        daily=[(day, {o: daily[day][o] for o in OUTCOMES}) for day in chosen.days()],
        records=records,
        answers=sorted(
            (survey for survey in surveys if survey.answered_at is not None),
            key=lambda survey: survey.answered_at or survey.asked_at,
            reverse=True,
        )[:ANSWERS_SHOWN],
    )
