"""Parsing what personal agents send: bodies, inbound messages, ``wait`` and ``cursor``.

Each parser raises ``PoppyError("invalid_request", ...)`` with a description saying what is
wrong; unknown fields are ignored everywhere (Poppy §3.3).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from poppy_django import ids
from poppy_django.errors import PoppyError

_CONTEXT_TYPES: dict[str, type] = {"locale": str, "time_zone": str, "user_available": bool}


@dataclass(frozen=True)
class InboundMessage:
    id: str
    sender: str
    text: str | None
    data: dict[str, Any] | None
    context: dict[str, Any] | None

    @property
    def starts_turn(self) -> bool:
        """A context-only message updates the context and starts no turn."""
        return self.text is not None or self.data is not None

    def fingerprint(self, target: str) -> str:
        """What makes a retry "the same": content and where it was sent, unknown fields aside."""
        canonical = json.dumps(
            [target, self.sender, self.text, self.data, self.context],
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode()).hexdigest()


def parse_json_body(raw: bytes, *, required: bool) -> dict[str, Any]:
    """A JSON object; an empty body is ``{}`` when not required (handoff, close)."""
    if not raw.strip():
        if required:
            raise PoppyError("invalid_request", "The body must be a JSON object.")
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PoppyError("invalid_request", "The body is not valid JSON.") from exc
    except RecursionError as exc:  # e.g. a megabyte of "[": nested past what we parse
        raise PoppyError("invalid_request", "The body is nested too deeply.") from exc
    if not isinstance(body, dict):
        if required:
            raise PoppyError("invalid_request", "The body must be a JSON object.")
        return {}
    return body


def parse_message(body: dict[str, Any]) -> InboundMessage:
    message = body.get("message")
    if not isinstance(message, dict):
        raise PoppyError("invalid_request", "The body needs a message object.")
    message_id = message.get("id")
    if not ids.is_valid_id(message_id):
        raise PoppyError("invalid_request", "message.id must be 1-256 of [A-Za-z0-9_-].")
    sender = message.get("sender")
    if sender not in ("agent", "human"):
        raise PoppyError("invalid_request", 'message.sender must be "agent" or "human".')
    text = message.get("text")
    if text is not None and not isinstance(text, str):
        raise PoppyError("invalid_request", "message.text must be a string.")
    data = message.get("data")
    if data is not None and not isinstance(data, dict):
        raise PoppyError("invalid_request", "message.data must be an object.")
    context = message.get("context")
    if context is not None:
        if not isinstance(context, dict):
            raise PoppyError("invalid_request", "message.context must be an object.")
        for key, expected in _CONTEXT_TYPES.items():
            if key in context and not isinstance(context[key], expected):
                kind = "a boolean" if expected is bool else "a string"
                raise PoppyError("invalid_request", f"message.context.{key} must be {kind}.")
    if text is None and data is None and context is None:
        raise PoppyError("invalid_request", "A message needs text, data or context.")
    return InboundMessage(id=str(message_id), sender=sender, text=text, data=data, context=context)


def parse_parent(body: dict[str, Any]) -> str | None:
    parent = body.get("parent_conversation_id")
    if parent is None:
        return None
    if not isinstance(parent, str):
        raise PoppyError("invalid_request", "parent_conversation_id must be a string.")
    if not ids.is_valid_id(parent):
        raise PoppyError("conversation_not_found")
    return str(parent)


def parse_wait(raw: str | None, cap: float) -> float | None:
    """Seconds to hold a read (fractional allowed, capped), or None when not asked."""
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError as exc:
        raise PoppyError("invalid_request", "wait must be a non-negative number.") from exc
    if not math.isfinite(seconds) or seconds < 0:
        raise PoppyError("invalid_request", "wait must be a non-negative number.")
    return min(seconds, cap)
