"""The one wording of an unknown-key error: settings, their sub-dicts and system checks.

Below :mod:`poppy_django.conf` and :mod:`poppy_django.token_options`, which both word their
errors with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def unknown_keys(label: str, given: Iterable[Any], known: Iterable[str]) -> str | None:
    """The one wording of an unknown-key error (settings, sub-dicts, system checks), or None."""
    allowed = list(known)
    unknown = sorted(str(key) for key in set(given) - set(allowed))
    if not unknown:
        return None
    return f"Unknown {label} key(s): {', '.join(unknown)}. Known: {', '.join(allowed)}."


__all__ = ["unknown_keys"]
