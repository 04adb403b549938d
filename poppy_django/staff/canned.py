"""Canned replies: their placeholders, filled for one conversation.

A reply's text may say ``{name}`` (the User's name) and ``{order}`` (the order in the
conversation's context), each with a fallback after ``|`` for when it is unknown
(``Hi {name|there}``); without one, an unknown value is left out. What they say in a
conversation comes from ``POPPY["CANNED_REPLY_VALUES"]`` (:func:`values_from_context` by
default). Any other ``{...}`` is written as is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from poppy_django.conf import poppy_settings
from poppy_django.models import CannedReply, Conversation

#: The placeholders a canned reply may use.
PLACEHOLDERS = ("name", "order")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")(?:\|([^{}]*))?\}")
_ANY_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?:\|[^{}]*)?\}")


@dataclass(frozen=True)
class RenderedReply:
    """A canned reply as the reply box inserts it in one conversation."""

    shortcut: str
    title: str
    text: str


def _text(value: Any) -> str | None:
    if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
        return str(value).strip()
    return None


class CannedReplyValues(Protocol):
    """``POPPY["CANNED_REPLY_VALUES"]``: what canned replies' placeholders say in a
    conversation (``{"name": ..., "order": ...}``; None: the placeholder stays)."""

    def __call__(self, conversation: Conversation, /) -> Mapping[str, str | None]: ...


def values_from_context(conversation: Conversation) -> dict[str, str | None]:
    """The default ``CANNED_REPLY_VALUES``: from what the personal agent put in the context.

    ``name``: ``context["user_name"]``, ``context["name"]`` or ``context["user"]["name"]``;
    ``order``: ``context["order_id"]``, ``context["order"]`` (or its ``"id"``).
    """
    context: Mapping[str, Any] = conversation.context or {}
    user = context.get("user")
    order = context.get("order")
    return {
        "name": _text(context.get("user_name"))
        or _text(context.get("name"))
        or (_text(user.get("name")) if isinstance(user, Mapping) else None),
        "order": _text(context.get("order_id"))
        or _text(order)
        or (_text(order.get("id")) if isinstance(order, Mapping) else None),
    }


def unknown_placeholders(text: str) -> list[str]:
    """The ``{word}`` placeholders of ``text`` that are not filled in (a typo: ``{nmae}``)."""
    return sorted({found for found in _ANY_PLACEHOLDER.findall(text) if found not in PLACEHOLDERS})


def fill(text: str, values: Mapping[str, str | None]) -> str:
    """``text`` with its placeholders filled from ``values`` (or their fallbacks)."""

    def one(found: re.Match[str]) -> str:
        value = values.get(found.group(1))
        return value if value else (found.group(2) or "").strip()

    return _PLACEHOLDER.sub(one, text)


def render(conversation: Conversation, reply: CannedReply) -> RenderedReply:
    """One canned reply, filled for ``conversation``."""
    return rendered(conversation, [reply])[0]


def rendered(
    conversation: Conversation, replies: list[CannedReply] | None = None
) -> list[RenderedReply]:
    """The canned replies (every one, by shortcut, by default) filled for ``conversation``."""
    chosen = list(CannedReply.objects.all()) if replies is None else replies
    return [RenderedReply(r.shortcut, r.title, filled(conversation, r.text)) for r in chosen]


def filled(conversation: Conversation, text: str) -> str:
    """``text`` (a canned reply's or a macro's) with its placeholders filled for
    ``conversation``."""
    values_of: CannedReplyValues | None = poppy_settings.CANNED_REPLY_VALUES
    return fill(text, values_of(conversation) if values_of is not None else {})
