"""Who may write a conversation now: its lease, and the lease on its agent thread.

A *conversation lease* (``lease_owner`` / ``lease_expires_at``) makes one worker the
writer of a conversation; a *thread lease* (``thread_owner`` / ``thread_expires_at`` on the
thread root) makes one turn at a time run in an agent thread, which a conversation shares
with its Direct Conversation. Both are claimed by a conditional ``UPDATE``, renewed by one
heartbeat thread while held, and simply expire when their holder dies.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, cast

from django.db import connection, connections, models, router
from django.utils import timezone

from poppy_django import event_log, statements
from poppy_django.conf import poppy_settings
from poppy_django.models import Conversation

logger = logging.getLogger(__name__)

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


def _take(pk: str, owner: str, owner_field: str, until_field: str) -> bool:
    """One conditional UPDATE: ``owner`` holds the row's lease (or thread) until
    :func:`lease_until` unless another owner holds it unexpired."""
    database = connections[router.db_for_write(Conversation)]
    until = cast(models.DateTimeField, Conversation._meta.get_field(until_field))

    def moment(value: datetime) -> Any:
        return until.get_db_prep_value(value, database)

    with database.cursor() as cursor:
        cursor.execute(
            statements.lease_taken(owner_field, until_field),
            [owner, moment(lease_until()), pk, moment(timezone.now()), owner],
        )
        return cursor.rowcount == 1


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
    """What one worker holds for one conversation, renewed together by its heartbeat."""

    def __init__(self, conversation_id: str, owner: str) -> None:
        self.conversation_id = conversation_id
        self.owner = owner
        #: Set when a renewal found the conversation lease gone.
        self.lost = threading.Event()
        self.thread_root: str | None = None

    def renew(self) -> None:
        until = lease_until()
        renewed = Conversation.objects.filter(
            pk=self.conversation_id, lease_owner=self.owner
        ).update(lease_expires_at=until)
        if renewed != 1:
            self.lost.set()
            return
        root = self.thread_root
        if root is not None:
            Conversation.objects.filter(pk=root, thread_owner=self.owner).update(
                thread_expires_at=until
            )

    @contextmanager
    def agent_thread(self, root_id: str, *, taken: bool = False) -> Iterator[None]:
        """Hold the agent thread for one turn (``taken``: the claim already took it); wait
        (bounded) while another turn runs in it.

        The bound is a turn's time limit plus a lease: by then the other turn has ended, been
        abandoned, or its worker's claim has expired.
        """
        bound = poppy_settings.TURN_TIMEOUT_SECONDS + poppy_settings.LEASE_SECONDS
        deadline = time.monotonic() + bound
        while not taken and not acquire_thread(root_id, self.owner):
            if self.lost.is_set():
                raise LeaseLost(self.conversation_id)
            if time.monotonic() > deadline:
                raise ThreadBusy(root_id)
            time.sleep(THREAD_POLL_SECONDS)
        self.thread_root = root_id
        try:
            yield
        finally:
            if self.thread_root is not None:  # not given back by the turn's own write
                self.thread_root = None
                release_thread(root_id, self.owner)

    def thread_given_back(self) -> None:
        """The turn's commit freed the thread in its own write: nothing left to renew or free."""
        self.thread_root = None


@contextmanager
def heartbeat(holder: Holder) -> Iterator[Holder]:
    """Renew what ``holder`` holds in the background until the block ends."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(poppy_settings.HEARTBEAT_SECONDS):
                holder.renew()
                if holder.lost.is_set():
                    return
        except Exception:
            logger.warning("poppy: heartbeat of %s failed", holder.conversation_id, exc_info=True)
        finally:
            connection.close()

    thread = threading.Thread(
        target=beat, name=f"poppy-heartbeat-{holder.conversation_id}", daemon=True
    )
    thread.start()
    try:
        yield holder
    finally:
        stop.set()
        thread.join()
