"""Recovery without an extra process: every worker takes up conversations whose writer died.

A conversation needs a writer while it is ``working`` (or has an action staff approved);
it has none when its lease expired (the worker died), or when no one ever claimed it for
``LEASE_SECONDS`` (the dispatch was lost, e.g. with the broker). Each Celery worker — and,
in the embedded default, the process running the in-process executor — runs a
:class:`Sweeper` thread that looks for such conversations at start and every
``SWEEP_SECONDS``, claims one with ``SELECT ... FOR UPDATE SKIP LOCKED`` (so two workers
never take the same one) and hands it to the process's turn engine, then looks again while
the engine has a free place.

From a writer's death to another worker taking its turn up: at most ``LEASE_SECONDS`` +
``SWEEP_SECONDS`` (35 s with the defaults), as long as a worker has a free sweeper.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import close_old_connections, connection

from poppy_django.conf import poppy_settings
from poppy_django.engine import leases
from poppy_django.engine import loop as engine
from poppy_django.observe import metrics
from poppy_django.observe.streaks import Streak
from poppy_django.registries import Registry
from poppy_django.store import lifecycle
from poppy_django.store.migration_state import unmigrated_hint

logger = logging.getLogger("poppy_django.recovery")


def sweep(stop: threading.Event | None = None) -> list[str]:
    """Take up orphaned conversations until none is left, each in a place of this process's
    engine (waiting for one while all are taken); their ids. Returns once they are in
    flight, not answered: a crashed worker's hundreds of turns are taken up at once."""
    running = engine.current()
    taken: list[str] = []
    while stop is None or not stop.is_set():
        if not running.reserve(timeout=1.0):
            if running.stopping:
                break  # the engine stopped (a shutdown): the next sweep has a new one
            continue
        owner = leases.new_owner()
        try:
            conversation_id = lifecycle.take_orphan(owner)
        except BaseException:
            running.give_back()
            raise
        if conversation_id is None:
            running.give_back()
            break
        logger.warning("poppy: taking up %s, left without a writer", conversation_id)
        metrics.lease_take_ups.add(1)
        taken.append(conversation_id)
        running.start(conversation_id, owner)
    _recover_parts(stop)
    return taken


#: ``recover(stop)``: take up what a part left behind, after a sweep's conversations
#: (``stop`` set: the process is stopping). It checks its own settings.
Recovery = Callable[[threading.Event | None], object]
#: What the parts that plug in take up at each sweep, by name (the Operations extension:
#: confirmed operations whose worker died; the core's overdue handoffs).
recoveries: Registry[Recovery] = Registry("recoveries")


def _recover_parts(stop: threading.Event | None) -> None:
    for recover in recoveries:
        recover(stop)


class Sweeper:
    """The recovery thread of one process: sweeps at start, then every ``SWEEP_SECONDS``."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            if poppy_settings.SWEEP_SECONDS is None:
                return
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._loop, args=(self._stop,), name="poppy-recovery", daemon=True
            )
            self._thread.start()

    def stop(self, wait: bool = True) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
            self._stop.set()
        if thread is not None and wait:
            thread.join()

    @staticmethod
    def _loop(stop: threading.Event) -> None:
        told = None  # the set-up mistake last told, said once while it lasts
        # The database may be away for a while: said when it starts and when it ends, not
        # at every sweep (docs/logging.md).
        failures = Streak(logger, "the recovery sweep")
        while not stop.is_set():
            try:
                close_old_connections()
                sweep(stop)
                told = None
                failures.succeeded()
            except Exception as exc:
                # A database never migrated is said once, with the fix.
                hint = unmigrated_hint(exc)
                if hint is None:
                    failures.failed(exc)
                elif hint != told:
                    logger.warning("poppy: the recovery sweep cannot run: %s", hint)
                told = hint
            finally:
                connection.close()
            interval = poppy_settings.SWEEP_SECONDS
            if interval is None or stop.wait(interval):
                return


#: This process's sweeper (Celery workers and the embedded executor start it).
sweeper = Sweeper()
