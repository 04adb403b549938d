"""An inbound message as the endpoint keeps it, which messages start a turn, and ``wait``.

Bodies are validated by :mod:`poppy_django.api.serializers`; this module holds what is not
validation: the validated message (and what makes a retry "the same"), :func:`starts_turn`
and ``wait``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from poppy_django.errors import PoppyError


def starts_turn(message: Mapping[str, Any]) -> bool:
    """Text or data asks for an answer; a context-only message updates the context only.

    The one home of this rule: the endpoint (on arrival), the turn loop (which messages are
    waiting) and the company side (after a person leaves) all ask here.
    """
    return message.get("text") is not None or message.get("data") is not None


@dataclass(frozen=True)
class InboundMessage:
    id: str
    sender: str
    text: str | None
    data: dict[str, Any] | None
    context: dict[str, Any] | None

    @property
    def starts_turn(self) -> bool:
        return starts_turn({"text": self.text, "data": self.data})

    def fingerprint(self, target: str) -> str:
        """What makes a retry "the same": content and where it was sent, unknown fields aside."""
        canonical = json.dumps(
            [target, self.sender, self.text, self.data, self.context],
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode()).hexdigest()


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
