"""What one turn's run holds: the conversation's lease, and its agent thread while a turn
runs in it (:class:`Holder`), under an owner name unique to the process and the run.

A *conversation lease* (``lease_owner`` / ``lease_expires_at``) makes one worker the
writer of a conversation; a *thread lease* (``thread_owner`` / ``thread_expires_at`` on the
thread root) makes one turn at a time run in an agent thread, which a conversation shares
with its Direct Conversation. The conversation's lifecycle takes, renews and frees them
(:mod:`poppy_django.store.lifecycle`): each is claimed by a conditional ``UPDATE``, renewed
while held (every lease of a process in one statement, the engine's heartbeat) and simply
expires when its holder dies.
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
from typing import Any

from poppy_django.conf import poppy_settings
from poppy_django.store import lifecycle

#: How often a turn waiting for a busy agent thread checks it again, in seconds.
THREAD_POLL_SECONDS = 0.2


class ThreadBusy(Exception):
    """The agent thread stayed busy for longer than a turn may last."""


def new_owner() -> str:
    return f"{socket.gethostname()[:24]}:{os.getpid()}:{secrets.token_hex(4)}"


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
        while not taken and not await run_sync(lifecycle.take_thread, root_id, self.owner):
            if self.lost.is_set():
                raise lifecycle.LeaseLost(self.conversation_id)
            if time.monotonic() > deadline:
                raise ThreadBusy(root_id)
            await asyncio.sleep(THREAD_POLL_SECONDS)
        self.thread_root = root_id
        try:
            yield
        finally:
            if self.thread_root is not None:  # not given back by the turn's own write
                self.thread_root = None
                await run_sync(lifecycle.free_thread, root_id, self.owner)

    def thread_given_back(self) -> None:
        """The turn's commit freed the thread in its own write: nothing left to renew or free."""
        self.thread_root = None
