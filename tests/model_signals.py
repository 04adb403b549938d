"""The model signals a personal agent's message sends, recorded (shared by the PostgreSQL and
the SQLite suites: the same assertions hold on both)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db.models.signals import post_save, pre_save

from poppy_django.models import Conversation, MessageReceipt

Seen = tuple[str, str, bool | None, frozenset[str] | None]


@contextmanager
def saves() -> Iterator[list[Seen]]:
    """``(signal, model, created, update_fields)`` of each save signal sent meanwhile for a
    conversation or a message receipt, in order."""
    seen: list[Seen] = []

    def before(sender: type, update_fields: Any = None, **kwargs: Any) -> None:
        seen.append(("pre_save", sender.__name__, None, update_fields))

    def after(sender: type, created: bool, update_fields: Any = None, **kwargs: Any) -> None:
        seen.append(("post_save", sender.__name__, created, update_fields))

    for model in (Conversation, MessageReceipt):
        pre_save.connect(before, sender=model, weak=False, dispatch_uid=f"t-pre-{model}")
        post_save.connect(after, sender=model, weak=False, dispatch_uid=f"t-post-{model}")
    try:
        yield seen
    finally:
        for model in (Conversation, MessageReceipt):
            pre_save.disconnect(sender=model, dispatch_uid=f"t-pre-{model}")
            post_save.disconnect(sender=model, dispatch_uid=f"t-post-{model}")


def assert_a_messages_saves(seen: list[Seen]) -> None:
    """A message's write: the conversation's row saved (its ``last_seq`` among the fields,
    not created), then its receipt created, each ``pre_save`` before its ``post_save``."""
    conversation = [s for s in seen if s[1] == "Conversation"]
    receipt = [s for s in seen if s[1] == "MessageReceipt"]
    assert [s[0] for s in conversation] == ["pre_save", "post_save"]
    assert conversation[1][2] is False
    assert conversation[0][3] == conversation[1][3] and "last_seq" in (conversation[1][3] or ())
    assert receipt == [
        ("pre_save", "MessageReceipt", None, None),
        ("post_save", "MessageReceipt", True, None),
    ]
