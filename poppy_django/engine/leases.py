"""Who may write a conversation now: its lease, and the lease on its agent thread.

A *conversation lease* (``lease_owner`` / ``lease_expires_at``) makes one worker the
writer of a conversation; a *thread lease* (``thread_owner`` / ``thread_expires_at`` on the
thread root) makes one turn at a time run in an agent thread, which a conversation shares
with its Direct Conversation. Both are claimed by a conditional ``UPDATE``, renewed while
held — every lease of a process in one statement (:func:`renew_all`, the engine's heartbeat)
— and simply expire when their holder dies.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any, cast

from django.db import connections, models, router
from django.utils import timezone

from poppy_django.conf import poppy_settings
from poppy_django.models import Conversation
from poppy_django.store import backends, event_log

#: How often a turn waiting for a busy agent thread checks it again, in seconds.
THREAD_POLL_SECONDS = 0.2


class LeaseLost(Exception):
    """Another worker took the conversation over: stop without writing."""


class ThreadBusy(Exception):
    """The agent thread stayed busy for longer than a turn may last."""


def new_owner() -> str:
    return f"{socket.gethostname()[:24]}:{os.getpid()}:{secrets.token_hex(4)}"


def lease_until() -> datetime:
    return timezone.now() + timedelta(seconds=poppy_settings.LEASE_SECONDS)


def acquire(conversation_id: str, owner: str) -> bool:
    """Claim the conversation if no one holds it or the holder's claim expired."""
    return _take(conversation_id, owner, "lease_owner", "lease_expires_at")


def acquire_locked(conversation_id: str, owner: str) -> Conversation | None:
    """In a transaction: :func:`acquire`, and the conversation row-locked until the
    transaction ends when it was taken (None: another worker holds it). On PostgreSQL one
    statement: the lease's ``UPDATE`` returns the row it locked."""
    parameters = _take_parameters(conversation_id, owner, "lease_expires_at")
    return backends.for_writing(Conversation).take_and_lock(conversation_id, parameters)


def _take(pk: str, owner: str, owner_field: str, until_field: str) -> bool:
    """One conditional UPDATE: ``owner`` holds the row's lease (or thread) until
    :func:`lease_until` unless another owner holds it unexpired."""
    return backends.for_writing(Conversation).take(
        owner_field, until_field, _take_parameters(pk, owner, until_field)
    )


def _take_parameters(pk: str, owner: str, until_field: str) -> list[Any]:
    """:meth:`~poppy_django.store.statements.Statements.lease_taken`'s parameters: the owner,
    until when, the id, now, the owner again."""
    database = connections[router.db_for_write(Conversation)]
    until = cast(models.DateTimeField, Conversation._meta.get_field(until_field))
    return [
        owner,
        until.get_db_prep_value(lease_until(), database),
        pk,
        until.get_db_prep_value(timezone.now(), database),
        owner,
    ]


def release(conversation: Conversation) -> None:
    """Free the lease of a conversation locked by its holder."""
    conversation.lease_owner = None
    conversation.lease_expires_at = None
    event_log.save(conversation, "lease_owner", "lease_expires_at")


def lock_owned(conversation_id: str, owner: str) -> Conversation:
    """The conversation row-locked, only while ``owner`` still holds its lease."""
    conversation = event_log.lock(conversation_id)
    if conversation.lease_owner != owner:
        raise LeaseLost(conversation_id)
    return conversation


def acquire_thread(root_id: str, owner: str) -> bool:
    """Claim the agent thread rooted at ``root_id`` if no live turn runs in it."""
    return _take(root_id, owner, "thread_owner", "thread_expires_at")


def release_thread(root_id: str, owner: str) -> None:
    Conversation.objects.filter(pk=root_id, thread_owner=owner).update(
        thread_owner=None, thread_expires_at=None
    )


def take_own_thread(conversation: Conversation, owner: str) -> bool:
    """Claim the agent thread of a locked conversation that is its own thread root, in the
    row's next write, if no live turn runs in it (what :func:`acquire_thread` does, without
    a statement of its own)."""
    if conversation.thread_root_id != conversation.id:
        return False  # a Direct: its thread lives on its parent's row
    free = (
        conversation.thread_owner is None
        or conversation.thread_owner == owner
        or (
            conversation.thread_expires_at is not None
            and conversation.thread_expires_at < timezone.now()
        )
    )
    if free:
        conversation.thread_owner = owner
        conversation.thread_expires_at = lease_until()
        event_log.save(conversation, "thread_owner", "thread_expires_at")
    return free


def give_back_own_thread(conversation: Conversation, owner: str) -> bool:
    """Free the agent thread of a locked conversation that is its own thread root, in the
    row's next write, if ``owner`` holds it."""
    if conversation.thread_root_id != conversation.id or conversation.thread_owner != owner:
        return False
    conversation.thread_owner = None
    conversation.thread_expires_at = None
    event_log.save(conversation, "thread_owner", "thread_expires_at")
    return True


class Holder:
    """What one turn's run holds for one conversation: its lease, and the agent thread while a
    turn runs in it. The engine's heartbeat renews every holder of the process together."""

    def __init__(self, conversation_id: str, owner: str) -> None:
        self.conversation_id = conversation_id
        self.owner = owner
        #: Set when a renewal found the conversation lease gone.
        self.lost = threading.Event()
        self.thread_root: str | None = None
        self._on_lost: list[Callable[[], None]] = []

    def mark_lost(self) -> None:
        """Another worker holds the conversation now (called by the heartbeat's thread)."""
        self.lost.set()
        for callback in list(self._on_lost):
            callback()

    def on_lost(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (from any thread) when the lease is found lost; returns how to
        stop that."""
        self._on_lost.append(callback)
        if self.lost.is_set():
            callback()
        return lambda: self._on_lost.remove(callback) if callback in self._on_lost else None

    @asynccontextmanager
    async def agent_thread(
        self,
        root_id: str,
        run_sync: Callable[..., Awaitable[Any]],
        *,
        taken: bool = False,
    ) -> AsyncIterator[None]:
        """Hold the agent thread for one turn (``taken``: the claim already took it); wait
        (bounded, without holding a thread) while another turn runs in it. ``run_sync`` runs
        the blocking statements off the loop.

        The bound is a turn's time limit plus a lease: by then the other turn has ended, been
        abandoned, or its worker's claim has expired.
        """
        bound = poppy_settings.TURN_TIMEOUT_SECONDS + poppy_settings.LEASE_SECONDS
        deadline = time.monotonic() + bound
        while not taken and not await run_sync(acquire_thread, root_id, self.owner):
            if self.lost.is_set():
                raise LeaseLost(self.conversation_id)
            if time.monotonic() > deadline:
                raise ThreadBusy(root_id)
            await asyncio.sleep(THREAD_POLL_SECONDS)
        self.thread_root = root_id
        try:
            yield
        finally:
            if self.thread_root is not None:  # not given back by the turn's own write
                self.thread_root = None
                await run_sync(release_thread, root_id, self.owner)

    def thread_given_back(self) -> None:
        """The turn's commit freed the thread in its own write: nothing left to renew or free."""
        self.thread_root = None


def renew_all(owners: list[str]) -> set[str]:
    """Renew, in one statement, every conversation lease and agent thread these owners hold;
    the owners whose conversation lease was renewed (the others lost theirs)."""
    return backends.for_writing(Conversation).renew(owners, lease_until())
