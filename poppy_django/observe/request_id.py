"""The id of the HTTP request being served, attached to every moment logged while serving it."""

from __future__ import annotations

import secrets
from contextvars import ContextVar

from poppy_django import ids

#: The id of the HTTP request being served (``X-Request-ID`` when the caller sent a valid
#: one), attached to every moment logged while serving it.
request_id: ContextVar[str | None] = ContextVar("poppy_request_id", default=None)


def begin_request(sent: str | None) -> str:
    """Take the caller's request id if it is a plain id, else make one; returns it."""
    value = (
        sent
        if sent and ids.is_valid_id(sent) and len(sent) <= 64
        else f"req_{secrets.token_hex(8)}"
    )
    request_id.set(value)
    return value
