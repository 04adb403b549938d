"""What the endpoint keeps of an inbound message, and the ``wait`` query parameter.

Bodies are validated by :mod:`poppy_django.serializers`; this module holds what is not
validation: the validated message (and what makes a retry "the same") and ``wait``.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from poppy_django.errors import PoppyError


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
