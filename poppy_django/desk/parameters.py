"""What the desk's requests carry, read strictly: each parameter checked once, here, with the
error a staff member's page shows (``invalid_request``), never a 500.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.http import HttpRequest

from poppy_django import ids
from poppy_django.errors import PoppyError

#: A browser-made request id (``crypto.randomUUID()`` or the page's fallback).
REQUEST_ID = re.compile(r"[A-Za-z0-9_-]{8,64}")
#: A sequence number as ``?after=`` takes it (a bigint column holds 18 digits safely).
SEQ = re.compile(r"[0-9]{1,18}")
#: The longest reply or reason a person may send.
MAX_TEXT = 10_000


def body(request: HttpRequest) -> dict[str, Any]:
    """The request's JSON object."""
    try:
        found = json.loads(request.body or b"{}")
    except (ValueError, RecursionError) as exc:
        raise PoppyError("invalid_request", "The body must be JSON.") from exc
    if not isinstance(found, dict):
        raise PoppyError("invalid_request", "The body must be a JSON object.")
    return found


def request_id(body: dict[str, Any]) -> str:
    """The id the page made for this request: the service echoes it on what it causes."""
    found = body.get("request_id")
    if not isinstance(found, str) or not REQUEST_ID.fullmatch(found):
        raise PoppyError("invalid_request", "request_id: 8-64 characters of [A-Za-z0-9_-].")
    return found


def text(body: dict[str, Any], name: str) -> str:
    """A required text (a reply, a reason, a teammate), stripped."""
    value = body.get(name)
    if not isinstance(value, str) or not value.strip():
        raise PoppyError("invalid_request", f"{name} is required.")
    if len(value) > MAX_TEXT:
        raise PoppyError("invalid_request", f"{name} is too long.")
    return value.strip()


def optional_text(body: dict[str, Any], name: str) -> str:
    """A text that may be left out (a transfer's note), stripped; "" when absent."""
    value = body.get(name, "")
    if not isinstance(value, str):
        raise PoppyError("invalid_request", f"{name} must be text.")
    if len(value) > MAX_TEXT:
        raise PoppyError("invalid_request", f"{name} is too long.")
    return value.strip()


def seen(conversation_id: str, body: dict[str, Any]) -> str:
    """The id of the last event the page showed, from its sequence number (``seen``)."""
    value = body.get("seen")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PoppyError("invalid_request", "seen: the sequence number of the last event shown.")
    return ids.event_id(conversation_id, value)


def sequence_number(request: HttpRequest, name: str, what: str) -> int:
    """A query parameter that is a sequence number (``0`` when absent).

    ASCII digits only, and no longer than a sequence number can be: ``str.isdigit`` also
    accepts "²" and "٣", and a 5,000-digit number is past what int() or the column take.
    """
    found = optional_sequence_number(request, name, what)
    return 0 if found is None else found


def optional_sequence_number(request: HttpRequest, name: str, what: str) -> int | None:
    """:func:`sequence_number`, None when absent."""
    value = request.GET.get(name)
    if value is None:
        return None
    if not SEQ.fullmatch(value):
        raise PoppyError("invalid_request", f"{name} must be {what}.")
    return int(value)


#: The longest search or tag a queue's address may carry.
MAX_QUERY = 500


def query_text(request: HttpRequest, name: str) -> str:
    """A query parameter that is text (a search, a tag), "" when absent; ``invalid_request``
    for one holding U+0000 (PostgreSQL keeps no NUL in text: the query would fail) or past
    :data:`MAX_QUERY` characters."""
    value = request.GET.get(name, "")
    if "\x00" in value or len(value) > MAX_QUERY:
        raise PoppyError("invalid_request", f"{name}: at most {MAX_QUERY} characters, no NUL.")
    return value
