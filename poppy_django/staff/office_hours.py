"""Office hours: when people take handoffs (``POPPY["OFFICE_HOURS"]``).

The setting names a time zone, the hours of each weekday (``"mon-fri": "09:00-17:30"``,
several ranges separated by commas) and dates the office is closed. A weekday not named
is closed. ``None`` (the default): always open. Parsed on use, because it is read once per
handoff request; check ``poppy_django.E010`` parses it at start-up.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from poppy_django.conf import poppy_settings, unknown_keys

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
KEYS = ("TIME_ZONE", "HOURS", "CLOSED_DATES")
_RANGE = re.compile(r"\s*([0-2][0-9]):([0-5][0-9])\s*-\s*([0-2][0-9]):([0-5][0-9])\s*")
LABEL = 'POPPY["OFFICE_HOURS"]'


@dataclass(frozen=True)
class OfficeHours:
    """Parsed office hours: open ranges (minutes from midnight) per weekday (0 = Monday)."""

    zone: ZoneInfo
    week: tuple[tuple[tuple[int, int], ...], ...]
    closed_dates: frozenset[date]
    #: The hours as configured, for the personal agent ("mon-fri 09:00-17:30 (Europe/Paris)").
    description: str

    def open_at(self, moment: datetime) -> bool:
        local = moment.astimezone(self.zone)
        if local.date() in self.closed_dates:
            return False
        minute = local.hour * 60 + local.minute
        return any(start <= minute < end for start, end in self.week[local.weekday()])


def _days(label: str, key: str) -> list[int]:
    """``"mon"`` or ``"mon-fri"`` → weekday numbers."""
    first, _, last = key.strip().lower().partition("-")
    if first not in DAYS or (last and last not in DAYS):
        raise ImproperlyConfigured(
            f"{label}: {key!r} is not a weekday or a range of them (mon-fri)."
        )
    start, end = DAYS.index(first), DAYS.index(last or first)
    if end < start:
        raise ImproperlyConfigured(f"{label}: {key!r} runs backwards.")
    return list(range(start, end + 1))


def _ranges(label: str, value: Any) -> list[tuple[int, int]]:
    """``"09:00-12:00, 13:00-17:30"`` → minute ranges; ``"24:00"`` ends a day."""
    if not isinstance(value, str):
        raise ImproperlyConfigured(f"{label} must be a string such as '09:00-17:30'.")
    ranges = []
    for part in value.split(","):
        found = _RANGE.fullmatch(part)
        if found is None:
            raise ImproperlyConfigured(f"{label}: {part.strip()!r} is not HH:MM-HH:MM.")
        h1, m1, h2, m2 = (int(group) for group in found.groups())
        start, end = h1 * 60 + m1, h2 * 60 + m2
        if h1 > 23 or end > 24 * 60 or end <= start:
            raise ImproperlyConfigured(
                f"{label}: {part.strip()!r} must end after it starts, by 24:00 "
                "(split hours past midnight across two days)."
            )
        ranges.append((start, end))
    return ranges


def parse(value: Any) -> OfficeHours | None:
    """The setting's value parsed, or :class:`ImproperlyConfigured` naming what is wrong."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ImproperlyConfigured(f"{LABEL} must be a dict or None.")
    unknown = unknown_keys(LABEL, value, KEYS)
    if unknown:
        raise ImproperlyConfigured(unknown)
    zone_name = value.get("TIME_ZONE", "UTC")
    try:
        zone = ZoneInfo(str(zone_name))
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ImproperlyConfigured(f"{LABEL}['TIME_ZONE'] = {zone_name!r} is unknown.") from exc
    hours = value.get("HOURS", {})
    if not isinstance(hours, Mapping) or not hours:
        raise ImproperlyConfigured(f"{LABEL}['HOURS'] must name the open weekdays.")
    week: list[list[tuple[int, int]]] = [[] for _ in DAYS]
    for key, ranges in hours.items():
        for day in _days(f"{LABEL}['HOURS']", str(key)):
            week[day].extend(_ranges(f"{LABEL}['HOURS'][{key!r}]", ranges))
    closed: set[date] = set()
    for item in value.get("CLOSED_DATES", ()):
        try:
            closed.add(date.fromisoformat(str(item)))
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"{LABEL}['CLOSED_DATES']: {item!r} is not a date (YYYY-MM-DD)."
            ) from exc
    description = ", ".join(f"{key} {ranges}" for key, ranges in hours.items())
    return OfficeHours(
        zone=zone,
        week=tuple(tuple(sorted(day)) for day in week),
        closed_dates=frozenset(closed),
        description=f"{description} ({zone.key})",
    )


def configured() -> OfficeHours | None:
    return parse(poppy_settings.OFFICE_HOURS)


def open_now(moment: datetime | None = None) -> bool:
    """Whether people take handoffs now (always, without office hours)."""
    hours = configured()
    return hours is None or hours.open_at(moment or timezone.now())
