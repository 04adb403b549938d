"""The desk's tags on conversations: added and removed by staff, the Company Agent's tools
and ``POPPY["TAG_RULES"]``; staff only, never on the wire.

A tag is named by a slug ("refund", "vip-customer"): a name is trimmed and lower-cased, and
anything else is refused with ``invalid_request`` before anything is written. A tag is made
the first time something uses it; each conversation's tag keeps who put it there. (The
desk's log records staff's changes: :func:`poppy_django.service.tag`.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from poppy_django.conf import TAG_NAME, poppy_settings
from poppy_django.errors import PoppyError
from poppy_django.models import Conversation, ConversationTag, Tag

#: The most tags one call may add.
MAX_AT_ONCE = 20


def normalized(names: Iterable[object]) -> list[str]:
    """The names as tags are named (trimmed, lower case, spaces as ``-``), each once, in
    order; ``invalid_request`` for any that cannot be one."""
    found: list[str] = []
    for name in names:
        if not isinstance(name, str):
            raise PoppyError("invalid_request", "A tag is a name (text).")
        slug = re.sub(r"\s+", "-", name.strip().lower())
        if not TAG_NAME.fullmatch(slug):
            raise PoppyError(
                "invalid_request",
                f"{name!r} is not a tag: 1-50 lower case letters, digits, - and _.",
            )
        if slug not in found:
            found.append(slug)
    if len(found) > MAX_AT_ONCE:
        raise PoppyError("invalid_request", f"At most {MAX_AT_ONCE} tags at once.")
    return found


def add(conversation: Conversation, names: Iterable[object], *, by: str) -> list[str]:
    """Tag ``conversation`` (made the tags that do not exist yet); the names it did not
    have before."""
    wanted = normalized(names)
    if not wanted:
        return []
    Tag.objects.bulk_create([Tag(name=name) for name in wanted], ignore_conflicts=True)
    tags = {tag.name: tag for tag in Tag.objects.filter(name__in=wanted)}
    had = set(
        ConversationTag.objects.filter(
            conversation=conversation, tag__in=tags.values()
        ).values_list("tag__name", flat=True)
    )
    added = [name for name in wanted if name not in had]
    ConversationTag.objects.bulk_create(
        [ConversationTag(conversation=conversation, tag=tags[name], by=by) for name in added],
        ignore_conflicts=True,
    )
    return added


def remove(conversation: Conversation, names: Iterable[object]) -> list[str]:
    """Take tags off ``conversation``; the names it had."""
    wanted = normalized(names)
    taken = sorted(
        ConversationTag.objects.filter(conversation=conversation, tag__name__in=wanted).values_list(
            "tag__name", flat=True
        )
    )
    ConversationTag.objects.filter(conversation=conversation, tag__name__in=taken).delete()
    return taken


def names_of(conversation_id: str) -> list[str]:
    """The conversation's tags, by name."""
    return list(
        ConversationTag.objects.filter(conversation_id=conversation_id)
        .order_by("tag__name")
        .values_list("tag__name", flat=True)
    )


def every_name() -> list[str]:
    """Every tag there is (the desk offers them), by name."""
    return list(Tag.objects.order_by("name").values_list("name", flat=True))


def by_rules(texts: Iterable[str]) -> list[str]:
    """The tags ``POPPY["TAG_RULES"]`` give customers' messages saying ``texts``."""
    rules = poppy_settings.TAG_RULES
    return [name for name, pattern in rules.items() if any(pattern.search(t) for t in texts)]
