"""The engine's publishing thread: text deltas relayed to readers, a tick's worth at a time.

A slow Redis never blocks the event loop, and a token-by-token model costs one publish a
tick (``DELTA_TICK_SECONDS``), not one a token.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.db import connection

from poppy_django.fanout import publishing

logger = logging.getLogger("poppy_django.engine")

#: Text deltas waiting for the publishing thread before new ones are dropped (deltas are
#: never stored: a reader that misses one gets the whole message when it is committed).
MAX_PENDING_DELTAS = 10_000
#: How long the publishing thread gathers text deltas before sending them in one go: the
#: most a delta waits, traded for one fan-out message a tick instead of one a token.
DELTA_TICK_SECONDS = 0.05
#: The same for the desk's browser streams (one django-eventstream event per conversation a
#: desk tick): staff watching a reply being written need no token-by-token pace.
DESK_DELTA_TICK_SECONDS = 0.25


class DeltaPublisher:
    """The thread that relays text deltas off the event loop: a tick's worth at a time.

    Pieces given within ``tick`` seconds of the first one waiting go to the conversations'
    readers together, in one call of ``publish`` (one message on the bus, whichever
    conversations they belong to), the consecutive pieces of a message joined into one: a
    token-by-token model costs one Redis ``PUBLISH`` a tick, not one a token, and readers
    still see the text as it streams (at most ``tick`` later). The desk's browser streams
    (``publish_desk``: one django-eventstream event per conversation) get the same pieces
    every ``desk_tick``, so a conversation costs one desk event per desk tick, not one per
    token. :meth:`flush` sends what is waiting at once (a turn about to commit its reply, so
    its deltas go out before it).
    """

    def __init__(
        self,
        publish: Callable[[list[tuple[str, str, str]]], None] | None = None,
        tick: float = DELTA_TICK_SECONDS,
        publish_desk: Callable[[list[tuple[str, str, str]]], None] | None = None,
        desk_tick: float = DESK_DELTA_TICK_SECONDS,
    ) -> None:
        self._publish = publish or _publish_to_readers
        self._publish_desk = publish_desk or (_publish_to_desk if publish is None else None)
        self._tick = tick
        self._desk_tick = desk_tick
        self._pending: list[tuple[str, str, str]] = []
        self._changed = threading.Condition()
        #: Deltas taken (not dropped) and sent so far, and who waits for a count to be sent.
        self._taken = self._sent = 0
        self._flushes: list[tuple[int, Callable[[], None]]] = []
        self._dropped = False
        self._stopping = False
        self._thread = threading.Thread(target=self._work, name="poppy-deltas", daemon=True)
        self._thread.start()

    def publish(self, conversation_id: str, message_id: str, text: str) -> None:
        with self._changed:
            if len(self._pending) >= MAX_PENDING_DELTAS:
                if not self._dropped:
                    logger.warning(
                        "poppy: text deltas are published slower than produced; dropping"
                    )
                self._dropped = True
                return
            self._pending.append((conversation_id, message_id, text))
            self._taken += 1
            if len(self._pending) == 1:
                self._changed.notify()

    def flush(self, done: Callable[[], None]) -> None:
        """Send what is waiting now; call ``done`` once every delta given so far is sent
        (from the publishing thread, or here when nothing is waiting)."""
        with self._changed:
            sent_already = self._sent >= self._taken
            if not sent_already:
                self._flushes.append((self._taken, done))
                self._changed.notify()
        if sent_already:
            done()

    def stop(self, wait: bool = True) -> None:
        with self._changed:
            self._stopping = True
            self._changed.notify()
        if wait:
            self._thread.join(timeout=10)

    def _work(self) -> None:
        desk: list[tuple[str, str, str]] = []
        desk_due = 0.0
        try:
            while True:
                batch, now_please = self._next_batch(desk_due if desk else None)
                if not batch and not desk:
                    return  # stopped, nothing left
                self._send(self._publish, batch)
                if self._publish_desk is not None:
                    if batch and not desk:
                        desk_due = time.monotonic() + self._desk_tick
                    desk += batch
                    if desk and (now_please or time.monotonic() >= desk_due):
                        self._send(self._publish_desk, desk)
                        desk = []
                with self._changed:
                    self._sent += len(batch)
                    self._dropped = False
                    ready = [done for upto, done in self._flushes if upto <= self._sent]
                    self._flushes = [(u, d) for u, d in self._flushes if u > self._sent]
                for done in ready:
                    done()
        finally:
            connection.close()

    @staticmethod
    def _send(
        publish: Callable[[list[tuple[str, str, str]]], None], deltas: list[tuple[str, str, str]]
    ) -> None:
        if not deltas:
            return
        try:
            publish(coalesced(deltas))
        except Exception:  # publishing never fails a turn
            logger.warning("poppy: could not publish text deltas", exc_info=True)

    def _next_batch(self, desk_due: float | None) -> tuple[list[tuple[str, str, str]], bool]:
        """Wait for a delta (or the desk's tick), then a tick for more unless a flush or
        stop asks for them now: (the deltas, whether everything is to be sent now); nothing
        once stopped with nothing left."""

        def ready() -> bool:
            return bool(self._pending) or self._stopping

        with self._changed:
            if desk_due is None:
                self._changed.wait_for(ready)
            else:
                self._changed.wait_for(ready, max(0.0, desk_due - time.monotonic()))
            if self._pending and not self._flushes and not self._stopping:
                self._changed.wait_for(lambda: bool(self._flushes) or self._stopping, self._tick)
            batch, self._pending = self._pending, []
            return batch, bool(self._flushes) or self._stopping


def coalesced(deltas: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """One delta per message, its pieces joined in order, the messages in order of their
    first piece (pieces of different messages are independent)."""
    joined: dict[tuple[str, str], list[str]] = {}
    for conversation_id, message_id, text in deltas:
        joined.setdefault((conversation_id, message_id), []).append(text)
    return [(c, m, "".join(pieces)) for (c, m), pieces in joined.items()]


def _publish_to_readers(deltas: list[tuple[str, str, str]]) -> None:
    """The fan-out's relay to readers, looked up at each call (tests replace it)."""
    publishing.publish_deltas_to_readers(deltas)


def _publish_to_desk(deltas: list[tuple[str, str, str]]) -> None:
    publishing.publish_deltas_to_desk(deltas)
