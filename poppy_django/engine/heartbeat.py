"""The engine's heartbeat: one thread renewing, in one statement, every lease the process holds.

Each ``HEARTBEAT_SECONDS`` it renews the leases of conversations and agent threads held by
this process's turns, and tells a turn whose lease was taken over to stop.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

from django.db import connection

from poppy_django.conf import poppy_settings
from poppy_django.engine import leases
from poppy_django.observe import heartbeats
from poppy_django.observe.streaks import Streak
from poppy_django.store import lifecycle
from poppy_django.threads import give_back_pooled_connections

logger = logging.getLogger("poppy_django.engine")


class Heartbeat:
    """One thread renewing, in one statement, every lease this process holds."""

    def __init__(self) -> None:
        self._holders: dict[str, leases.Holder] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name="poppy-heartbeat", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def holding(self, holder: leases.Holder) -> Iterator[leases.Holder]:
        """Renew ``holder``'s leases until the block ends."""
        self.hold(holder)
        try:
            yield holder
        finally:
            self.drop(holder)

    def hold(self, holder: leases.Holder) -> None:
        """Renew ``holder``'s leases from now on (from any thread: a turn's first database
        job, right after it took the lease), until :meth:`drop`."""
        with self._lock:
            self._holders[holder.owner] = holder

    def drop(self, holder: leases.Holder) -> None:
        with self._lock:
            self._holders.pop(holder.owner, None)

    def held(self) -> list[leases.Holder]:
        with self._lock:
            return list(self._holders.values())

    def beat(self) -> None:
        """Renew them all now; mark those whose conversation lease was taken over."""
        holders = self.held()
        if not holders:
            return
        renewed = lifecycle.renew_leases([holder.owner for holder in holders])
        for holder in holders:
            if holder.owner not in renewed:
                holder.mark_lost()

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        if wait:
            self._thread.join(timeout=10)

    def _work(self) -> None:
        heartbeats.beat()
        failures = Streak(logger, "the lease heartbeat")
        try:
            while not self._stop.wait(poppy_settings.HEARTBEAT_SECONDS):
                heartbeats.beat()  # the worker probe's sign of life, whatever the database says
                try:
                    self.beat()
                    failures.succeeded()
                except Exception as exc:
                    # The database may be away: the next beat tries again (a lease lasts
                    # several beats); a broken connection is not kept. Logged once a streak.
                    failures.failed(exc)
                    connection.close()
                finally:
                    give_back_pooled_connections()
        finally:
            connection.close()
