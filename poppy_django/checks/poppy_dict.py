"""The ``POPPY`` dict itself: its keys, import strings, numeric ranges and texts (E0xx)."""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from poppy_django.api.discovery import DISCOVERY_KEYS
from poppy_django.conf import (
    DEFAULT_TEXTS,
    DEFAULTS,
    IMPORT_STRING_MAPS,
    IMPORT_STRINGS,
    poppy_settings,
    unknown_keys,
)
from poppy_django.staff import office_hours

#: A retention shorter than this prunes events a personal agent may still hold a cursor to
#: (it comes back after a pause, or a stream reconnects with Last-Event-ID): W004.
MIN_RETENTION_SECONDS = 3600.0


#: The numeric settings and the range each must be in: (minimum, maximum, integer).
#: The wire pins WAIT_MAX_SECONDS at 30 at most; MAX_BODY_BYTES must fit a message.
RANGES: dict[str, tuple[float, float | None, bool]] = {
    "WAIT_MAX_SECONDS": (0.0, 30.0, False),
    "PAGE_SIZE": (1, 1000, True),
    "MAX_BODY_BYTES": (1024, 16 * 1024 * 1024, True),
    "EXECUTOR_THREADS": (1, 256, True),
    "TURNS_IN_FLIGHT": (1, 100_000, True),
    "THREAD_HISTORY_ENTRIES": (1, None, True),
    "LEASE_SECONDS": (1.0, None, False),
    "HEARTBEAT_SECONDS": (0.1, None, False),
    "STREAM_KEEPALIVE_SECONDS": (1.0, None, False),
    "STREAM_MAX_SECONDS": (1.0, None, False),
    "WAKE_FALLBACK_SECONDS": (0.1, None, False),
    "RETENTION_SECONDS": (0.0, None, False),
    "STAFF_AWAY_AFTER_SECONDS": (1.0, None, False),
    "HANDOFF_MAX_WAIT_SECONDS": (1.0, None, False),
    "HANDOFF_WARN_AT": (0.0, 1.0, False),
    "DESK_CAPACITY": (0, None, True),
    "READINESS_ANSWER_SECONDS": (0.0, 300.0, False),
}

#: Numeric settings that may also be None (off).
_OPTIONAL = frozenset({"RETENTION_SECONDS", "HANDOFF_MAX_WAIT_SECONDS", "DESK_CAPACITY"})


#: Exclusive lower bounds (a zero cap or zero-second wait loop is never meant).
_EXCLUSIVE_MINIMUM = frozenset({"WAIT_MAX_SECONDS", "READINESS_ANSWER_SECONDS"})


#: The sub-keys of the dict settings (TOKENS is checked by E105).
HOOK_NAMES: dict[str, frozenset[str]] = {
    "HANDOFF_HOOKS": frozenset({"request", "assign", "message", "cancel"}),
    "DIRECT_HOOKS": frozenset({"opened", "closed"}),
}


#: The fields each text is formatted with (texts not listed are used as written).
TEXT_FIELDS: dict[str, frozenset[str]] = {
    "handoff_unavailable": frozenset({"reason"}),
    "outside_office_hours": frozenset({"hours"}),
    "sign_in_required": frozenset({"scope"}),
    "insufficient_scope": frozenset({"scope"}),
    "operation_revised": frozenset({"summary"}),
}


#: What the default ACTION_FORMATTER formats the action_* texts with.
ACTION_TEXT_FIELDS = frozenset({"summary", "summary_lower", "tool", "error"})


DEFAULT_ACTION_FORMATTER = DEFAULTS["ACTION_FORMATTER"]


Messages = list[checks.CheckMessage]


def check_id(number: str) -> str:
    return f"poppy_django.{number}"


def poppy_dict_problem() -> checks.CheckMessage | None:
    """E004 when ``settings.POPPY`` cannot be read at all (not a dict, unknown keys)."""
    raw = getattr(settings, "POPPY", None)
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        return checks.Error(
            f"settings.POPPY must be a dict, not {type(raw).__name__}.", id=check_id("E004")
        )
    unknown = unknown_keys("POPPY", raw, DEFAULTS)
    if unknown:
        return checks.Error(
            unknown, hint="The settings page of the documentation lists them.", id=check_id("E004")
        )
    return None


def unknown_sub_keys() -> Messages:
    """E004 for typos inside the dict-valued settings, which would be silently ignored."""
    known: dict[str, Iterable[str]] = {
        "DISCOVERY": DISCOVERY_KEYS,
        "TEXTS": DEFAULT_TEXTS,
        **HOOK_NAMES,
        "MODELS": (),  # any agent name: checked by W006
    }
    errors: Messages = []
    for name, allowed in known.items():
        value = poppy_settings.raw(name)
        if value is None:
            value = {}
        if not isinstance(value, Mapping):
            errors.append(checks.Error(f'POPPY["{name}"] must be a dict.', id=check_id("E004")))
            continue
        if name == "MODELS":
            continue
        unknown = unknown_keys(f'POPPY["{name}"]', value, sorted(allowed))
        if unknown:
            errors.append(checks.Error(unknown, id=check_id("E004")))
    return errors


def import_errors() -> Messages:
    """E001 for every import-string setting that cannot be imported."""
    errors: Messages = []
    for name in sorted(IMPORT_STRINGS | IMPORT_STRING_MAPS):
        if name in IMPORT_STRING_MAPS and not isinstance(poppy_settings.raw(name), Mapping | None):
            continue  # a hook map that is not a dict: E004 says so
        try:
            getattr(poppy_settings, name)
        except ImproperlyConfigured as exc:
            errors.append(checks.Error(str(exc), hint=_renamed(name), id=check_id("E001")))
    return errors


#: The verifier's package before 0.3.0, and its name since.
_OLD_VERIFIER, _VERIFIER = "poppy_django.auth.", "poppy_django.verifier."


def _renamed(name: str) -> str | None:
    """The fix when the setting names the verifier's package by its name before 0.3.0."""
    value = poppy_settings.raw(name)
    if isinstance(value, str) and value.startswith(_OLD_VERIFIER):
        renamed = _VERIFIER + value.removeprefix(_OLD_VERIFIER)
        return f"poppy_django.auth is poppy_django.verifier since 0.3.0: use {renamed!r}."
    return None


def number_setting(name: str) -> float | None:
    """The setting as a number, or None when it is not one (E005 reports it)."""
    value = poppy_settings.raw(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def range_errors() -> Messages:
    """E005 for numeric settings of the wrong type or outside their range."""
    errors: Messages = []
    for name, (low, high, integer) in RANGES.items():
        value = poppy_settings.raw(name)
        if name in _OPTIONAL and value is None:
            continue
        number = number_setting(name)
        kind = "an integer" if integer else "a number"
        bounds = f">= {low:g}" if name not in _EXCLUSIVE_MINIMUM else f"> {low:g}"
        if high is not None:
            bounds += f" and <= {high:g}"
        wrong = (
            number is None
            or (integer and not isinstance(value, int))
            or number < low
            or (name in _EXCLUSIVE_MINIMUM and number <= low)
            or (high is not None and number > high)
        )
        if wrong:
            errors.append(
                checks.Error(
                    f'POPPY["{name}"] = {value!r} is out of range: {kind} {bounds}.',
                    hint=f"The default is {DEFAULTS[name]!r}.",
                    id=check_id("E005"),
                )
            )
    return errors


def text_errors() -> Messages:
    """E008: a text override that the app could not format (unknown or positional field)."""
    texts = poppy_settings.raw("TEXTS") or {}
    if not isinstance(texts, Mapping):
        return []
    default_formatter = poppy_settings.raw("ACTION_FORMATTER") == DEFAULT_ACTION_FORMATTER
    errors: Messages = []
    for key, text in texts.items():
        if key not in DEFAULT_TEXTS:
            continue  # E004
        if not isinstance(text, str):
            errors.append(
                checks.Error(f'POPPY["TEXTS"]["{key}"] must be a string.', id=check_id("E008"))
            )
            continue
        if key.startswith("action_"):
            if not default_formatter:
                continue  # your formatter decides which fields it fills in
            fields = ACTION_TEXT_FIELDS
        elif key in TEXT_FIELDS:
            fields = TEXT_FIELDS[key]
        else:
            continue  # written as is, never formatted
        problem = _format_problem(text, fields)
        if problem:
            errors.append(
                checks.Error(
                    f'POPPY["TEXTS"]["{key}"] cannot be formatted: {problem}.',
                    hint=f"Available fields: {', '.join('{' + f + '}' for f in sorted(fields))}.",
                    id=check_id("E008"),
                )
            )
    return errors


def _format_problem(text: str, fields: frozenset[str]) -> str | None:
    try:
        used = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        return str(exc)
    for name in used:
        root = name.split(".")[0].split("[")[0]
        if root not in fields:
            return f"unknown field {{{name}}}" if root else "a positional field {}"
    return None


def office_hours_errors() -> Messages:
    """E010: office hours that cannot be read (a day, a time, a time zone, a date)."""
    try:
        office_hours.parse(poppy_settings.raw("OFFICE_HOURS"))
    except ImproperlyConfigured as exc:
        return [
            checks.Error(
                str(exc),
                hint='As in {"TIME_ZONE": "Europe/Paris", "HOURS": {"mon-fri": "09:00-17:30"}}.',
                id=check_id("E010"),
            )
        ]
    return []


def retention_warnings() -> Messages:
    """W004: events pruned sooner than a reader can come back for them."""
    retention = number_setting("RETENTION_SECONDS")
    if poppy_settings.raw("RETENTION_SECONDS") is None or retention is None or retention < 0:
        return []
    stream_max = number_setting("STREAM_MAX_SECONDS") or 0.0
    window = max(stream_max, MIN_RETENTION_SECONDS)
    if retention >= window:
        return []
    return [
        checks.Warning(
            f'POPPY["RETENTION_SECONDS"] = {retention:g} is shorter than the resume window '
            f"({window:g} s: at least an hour, and at least STREAM_MAX_SECONDS): cursors and "
            "Last-Event-IDs that personal agents still hold would answer 410 cursor_expired.",
            hint=f"Keep events at least {MIN_RETENTION_SECONDS:g} seconds (days are usual).",
            id=check_id("W004"),
        )
    ]
