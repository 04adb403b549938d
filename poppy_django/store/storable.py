"""What a database can keep and JSON can say: no U+0000, no lone surrogate, no NaN or
infinity, no nesting beyond :data:`MAX_DEPTH`.

PostgreSQL refuses NUL in text and ``jsonb``, UTF-8 cannot encode a lone surrogate, and
``NaN``/``Infinity`` are not JSON: a value holding one must be refused before it reaches a
query, a proposal or an answer (where it would be a ``500``, or an answer that is not JSON).
"""

from __future__ import annotations

import math
import re
from typing import Any

#: Deeper than this is refused: far beyond any real use, well inside what encoders recurse.
MAX_DEPTH = 64

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def problem(value: Any) -> str | None:
    """Why ``value`` (JSON, keys included) cannot be kept, or None when it can."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            if _UNSTORABLE.search(item):
                return "contains U+0000 or an unpaired surrogate"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "contains a number that is not finite"
        elif isinstance(item, dict | list | tuple):
            if depth > MAX_DEPTH:
                return f"is nested deeper than {MAX_DEPTH} levels"
            if isinstance(item, dict):
                pending.extend((key, depth) for key in item)
                pending.extend((child, depth + 1) for child in item.values())
            else:
                pending.extend((child, depth + 1) for child in item)
    return None
