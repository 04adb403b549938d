"""``POPPY["OPERATIONS"]``: the Operations extension's sub-keys, checked and typed once.

``ENABLED`` (False): offer the extension (announced in ``poppy.json``, endpoint routed).
``PATH`` ("poppy/operations"): where the operations endpoint is mounted.
``PROPOSE`` ("flagged"): which action tools propose an Operation instead of running under
the token's scope — "flagged" (those declared ``@tool(operation=True)``) or "all".
``LIFETIME_SECONDS`` (900): how long a proposal may be confirmed.
``CONFIRM_WAIT_SECONDS`` (10): how long a confirm's answer waits (holding no thread) for
the worker to finish; past it the answer is ``in_progress`` with ``Retry-After``.
``RETRY_AFTER_SECONDS`` (2): the ``Retry-After`` of an answer ``in_progress``.
``PAGE_PATH`` (None): where the website shows an operation to a personal agent's browser
(``{origin}/{PAGE_PATH}/{operation_id}``, each operation's ``url``), for the User to
confirm it there (:mod:`poppy_django.operations.page`; needs browser sessions). None: no
page, no ``url``.
``CLIENT_EXTENSIONS`` (None): import string of ``extensions(client_id) -> set[str]``, the
extensions a personal agent's client metadata lists; None: the authority's stored client
metadata when :mod:`poppy_django.authority` is installed, else none (never assumed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from poppy_django.conf import sub_settings

PROPOSE_CHOICES = ("flagged", "all")
KEYS = frozenset(
    {
        "ENABLED",
        "PATH",
        "PROPOSE",
        "LIFETIME_SECONDS",
        "CONFIRM_WAIT_SECONDS",
        "RETRY_AFTER_SECONDS",
        "CLIENT_EXTENSIONS",
        "PAGE_PATH",
    }
)


@dataclass(frozen=True)
class OperationsOptions:
    enabled: bool = False
    path: str = "poppy/operations"
    propose: str = "flagged"
    lifetime_seconds: float = 900.0
    confirm_wait_seconds: float = 10.0
    retry_after_seconds: int = 2
    client_extensions: Any = None
    page_path: str | None = None


def _number(name: str, value: Any, *, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise ImproperlyConfigured(f'POPPY["OPERATIONS"]["{name}"] must be a number >= {minimum}.')
    return float(value)


def options() -> OperationsOptions:
    """The options now (cheap: the settings object caches the mapping per settings version)."""
    raw = sub_settings("OPERATIONS", KEYS)
    propose = raw.get("PROPOSE", "flagged")
    if propose not in PROPOSE_CHOICES:
        raise ImproperlyConfigured(
            f'POPPY["OPERATIONS"]["PROPOSE"] is one of {", ".join(PROPOSE_CHOICES)}.'
        )
    hook = raw.get("CLIENT_EXTENSIONS")
    page = raw.get("PAGE_PATH")
    if page is not None and (not isinstance(page, str) or not page.strip("/")):
        raise ImproperlyConfigured('POPPY["OPERATIONS"]["PAGE_PATH"] is a path or None.')
    return OperationsOptions(
        enabled=bool(raw.get("ENABLED", False)),
        path=str(raw.get("PATH", "poppy/operations")).strip("/"),
        propose=str(propose),
        lifetime_seconds=_number("LIFETIME_SECONDS", raw.get("LIFETIME_SECONDS", 900), minimum=1),
        confirm_wait_seconds=_number("CONFIRM_WAIT_SECONDS", raw.get("CONFIRM_WAIT_SECONDS", 10)),
        retry_after_seconds=int(
            _number("RETRY_AFTER_SECONDS", raw.get("RETRY_AFTER_SECONDS", 2), minimum=1)
        ),
        client_extensions=import_string(hook) if isinstance(hook, str) else hook,
        page_path=page.strip("/") if isinstance(page, str) else None,
    )


def enabled() -> bool:
    return options().enabled
