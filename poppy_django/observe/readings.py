"""Values read from the database and the broker off the metrics' collection, kept with the
time they were read.

A gauge whose callback queries the database makes every collection of the process wait on
it: with PostgreSQL hung, a process's whole export stopped (its heartbeat and counters too),
and a command's exit hung in the SDK's shutdown collection. So the reads run here instead,
on daemon threads of each process (:class:`Reader`), every collection interval
(``OTEL_METRIC_EXPORT_INTERVAL``); the gauges' callbacks return what the last read found
and never wait. Each source reads on a thread of its own: a read that hangs holds that thread
only (the database hung does not stop the broker's reads); its gauges keep their last values,
and ``poppy.gauges.read_time`` (when each source last read, Unix time) stops moving, which
is what the alerts on a database or Redis out of reach look at.

The thread starts at the first collection (a process without an SDK never collects, so it
never reads), and again in a forked child (threads do not survive a fork).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("poppy_django.observe")

#: Seconds between reads when ``OTEL_METRIC_EXPORT_INTERVAL`` does not say (the SDK's default).
DEFAULT_INTERVAL = 60.0


def interval() -> float:
    """The metric export interval in seconds (``OTEL_METRIC_EXPORT_INTERVAL``, milliseconds)."""
    try:
        milliseconds = float(os.environ.get("OTEL_METRIC_EXPORT_INTERVAL", ""))
    except ValueError:
        return DEFAULT_INTERVAL
    return max(0.1, milliseconds / 1000)


@dataclass
class Source:
    """One thing read together (the database's gauges, the broker's queues): what it found,
    and when it last read (the reader's start until it has)."""

    name: str
    read: Callable[[], dict[str, Any]]
    found: dict[str, Any] = field(default_factory=dict)
    read_at: float = field(default_factory=time.time)
    failing_since: float | None = None


class Reader:
    """Reads each source every :func:`interval` seconds on a daemon thread of its own."""

    def __init__(self) -> None:
        self.sources: dict[str, Source] = {}
        self._lock = threading.Lock()
        self._reading: dict[str, threading.Lock] = {}  # a source's thread's read, or a caller's
        self._pid: int | None = None

    def add(self, name: str, read: Callable[[], dict[str, Any]]) -> None:
        self.sources[name] = Source(name, read)
        self._reading[name] = threading.Lock()

    def ensure_running(self) -> None:
        """Start this process's reading thread unless it runs (called at each collection)."""
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            now = time.time()
            for source in self.sources.values():  # a forked child starts its own clock
                source.read_at, source.failing_since = now, None
                threading.Thread(
                    target=self._run,
                    args=(source,),
                    name=f"poppy-gauges-{source.name}",
                    daemon=True,
                ).start()

    def _run(self, source: Source) -> None:
        while True:
            self.read(source)
            time.sleep(interval())

    def read(self, source: Source) -> None:
        with self._reading[source.name]:
            self._read(source)

    def read_all(self) -> None:
        """Read every source now, one after the other (tests call it to read at a known time)."""
        for source in list(self.sources.values()):
            self.read(source)

    def _read(self, source: Source) -> None:
        try:
            found = source.read()
        except Exception:
            if source.failing_since is None:
                source.failing_since = time.time()
                logger.warning(
                    "poppy: could not read the %s's gauges (not logged again until they read)",
                    source.name,
                    exc_info=True,
                )
            return
        source.found, source.read_at = found, time.time()
        if source.failing_since is not None:
            logger.info(
                "poppy: the %s's gauges read again (failing for %.0f s)",
                source.name,
                time.time() - source.failing_since,
            )
            source.failing_since = None

    def found(self, name: str) -> dict[str, Any]:
        """What ``name`` last read ({} until it has); starts the thread if it does not run."""
        self.ensure_running()
        return self.sources[name].found

    def read_times(self) -> dict[str, float]:
        self.ensure_running()
        return {name: source.read_at for name, source in self.sources.items()}


#: This process's reader; :mod:`poppy_django.observe.metrics` adds its sources.
reader = Reader()
