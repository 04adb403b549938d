"""The Company Agent's memory: an agent thread's entries, appended per turn, read as a window.

A thread keeps everything it was told, one row per entry, but a turn reads only the newest
``POPPY["THREAD_HISTORY_ENTRIES"]``: what a turn costs (queries, rows, the model's prompt)
does not grow with the conversation's age.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import QuerySet
from django.utils import timezone

from poppy_django.conf import poppy_settings
from poppy_django.models import AgentThread, AgentThreadEntry, Conversation
from poppy_django.store import backends, event_log


def append(thread: AgentThread, entries: Sequence[dict[str, str]]) -> None:
    """Add ``entries`` after the thread's newest, in two queries whatever its length.

    The caller holds the thread's row (``select_for_update``, or created in its transaction),
    so positions are never taken twice; the writes commit with whatever the caller writes.
    """
    if not entries:
        return
    first = thread.last_position + 1
    AgentThreadEntry.objects.bulk_create(
        AgentThreadEntry(thread=thread, position=first + i, role=entry["role"], text=entry["text"])
        for i, entry in enumerate(entries)
    )
    thread.last_position += len(entries)
    thread.save(update_fields=["last_position", "updated_at"])


def append_to(conversation: Conversation, actor_id: str, entries: Sequence[dict[str, str]]) -> None:
    """:func:`append` to the actor's thread in a conversation (its thread root's) without
    reading its row first: the positions are taken (holding the row until the caller's
    transaction ends, so they are never taken twice) and the entries written there. On
    PostgreSQL, within the conversation's :func:`~poppy_django.store.event_log.one_write`
    block (a turn's commit), in that block's one statement; elsewhere one statement on
    PostgreSQL and two on other databases. A turn does it every commit."""
    if not entries:
        return
    root_id = conversation.thread_root_id
    backend = backends.for_writing(AgentThread)
    now = timezone.now()
    along = backend.entries_along(root_id, actor_id, entries, now)
    if along is not None and event_log.write_along(conversation, along):
        return
    if not backend.append_entries(root_id, actor_id, entries, now, AgentThreadEntry):
        raise AgentThread.DoesNotExist(f"no thread of {actor_id!r} in {root_id}")


def made_alone(root_id: str, actor_id: str) -> bool:
    """Make the actor's thread in a conversation, empty, in one statement where the store
    can and when it is the conversation's first thread; whether it was made (False: the
    caller makes it, or finds it, as the ORM does)."""
    return bool(
        backends.for_writing(AgentThread).thread_made_alone(root_id, actor_id, timezone.now())
    )


def window(thread: AgentThread) -> list[dict[str, str]]:
    """The newest ``THREAD_HISTORY_ENTRIES`` entries, oldest first: what a turn shows the model."""
    return _window(AgentThreadEntry.objects.filter(thread=thread))


def window_of(root_id: str, actor_id: str) -> list[dict[str, str]]:
    """:func:`window` of the actor's thread in a conversation, without reading the thread's
    row first (one statement, written out: a turn runs it every time); empty when the thread
    has no entries or does not exist."""
    newest = backends.for_reading(AgentThreadEntry).thread_window(
        root_id, actor_id, poppy_settings.THREAD_HISTORY_ENTRIES
    )
    return [{"role": role, "text": text} for role, text in reversed(newest)]


def _window(entries: QuerySet[AgentThreadEntry]) -> list[dict[str, str]]:
    newest = list(
        entries.order_by("-position").values_list("role", "text")[
            : poppy_settings.THREAD_HISTORY_ENTRIES
        ]
    )
    return [{"role": role, "text": text} for role, text in reversed(newest)]
