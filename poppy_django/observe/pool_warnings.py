"""psycopg_pool's own warnings, once a streak: a database that is down fills no log.

While PostgreSQL is down, every process's pool (Django's ``OPTIONS["pool"]``) tries to
connect again and again, from each task that wanted a connection, and psycopg_pool warns at
every attempt ("error connecting in 'pool-1': connection failed: … Connection refused"): an
idle Celery worker (``prefork -c 2``) wrote 36 such warnings in 40 s, and each try of the
app's own loops added its own. :class:`PoolWarnings`, a filter on the ``psycopg.pool`` logger,
lets the first warning of each kind through (the server's words: a connection-level message
never quotes data), holds back the same kind for ``REPEAT_SECONDS``, then lets one through
saying how many it held back. Once the process gets a connection of that pool again
(Django's ``connection_created``, sent at each checkout from its pool), one line says the
database connects again and after how long.

:func:`install` puts it in place when the app loads (:meth:`PoppyDjangoConfig.ready`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.db.backends.signals import connection_created

from poppy_django.observe.streaks import REPEAT_SECONDS

#: The pool's logger (psycopg_pool logs under this name).
POOL_LOGGER = "psycopg.pool"
#: Where the end of a streak is said (a topic logger: observe.redaction.TOPIC_LOGGERS).
logger = logging.getLogger("poppy_django.database")
#: The pool's warning at each failed connection attempt (its format, as psycopg_pool logs it).
_CONNECT_FAILED = "error connecting in %r: %s"


class PoolWarnings(logging.Filter):
    """Each kind of the pool's warnings (its message's format) once a streak, repeated once
    every ``repeat`` seconds with the count held back; records below WARNING pass. A pool's
    streak of failed connection attempts ends when a connection of that pool is had."""

    def __init__(self, repeat: float = REPEAT_SECONDS) -> None:
        super().__init__()
        self.repeat = repeat
        self._lock = threading.Lock()
        self._told: dict[str, float] = {}
        self._held: dict[str, int] = {}
        #: By pool name: when its first failed connection attempt was, and how many since.
        self._failing: dict[str, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        kind = str(record.msg)
        now = time.monotonic()
        with self._lock:
            if kind == _CONNECT_FAILED and isinstance(record.args, tuple) and record.args:
                pool = str(record.args[0])
                since, attempts = self._failing.get(pool, (now, 0))
                self._failing[pool] = (since, attempts + 1)
            told = self._told.get(kind)
            if told is not None and now - told < self.repeat:
                self._held[kind] = self._held.get(kind, 0) + 1
                return False
            self._told[kind] = now
            held = self._held.pop(kind, 0)
        if held and told is not None:
            said = f"{record.getMessage()} ({held} more like it in the last {now - told:.0f} s)"
            record.msg, record.args = said, ()
        return True

    def connected(self, connection: Any = None, **kwargs: Any) -> None:
        """Django connected (``connection_created``): the streak of its pool ends, said once."""
        if not self._failing:  # the usual case: one read per checkout
            return
        pool = getattr(getattr(connection, "pool", None), "name", None)
        with self._lock:
            began = self._failing.pop(str(pool), None) if pool is not None else None
            if began is None:
                return
            if not self._failing:
                self._told.clear()
                self._held.clear()
        since, attempts = began
        logger.info(
            "poppy: the database connects again, after %.0f s and %d failed connection"
            " attempts of %s",
            time.monotonic() - since,
            attempts,
            pool,
        )


_installed: PoolWarnings | None = None


def install() -> PoolWarnings:
    """The filter on psycopg_pool's logger, ended by each new connection (once a process)."""
    global _installed
    if _installed is None:
        _installed = PoolWarnings()
        logging.getLogger(POOL_LOGGER).addFilter(_installed)
        connection_created.connect(_installed.connected, dispatch_uid="poppy_pool_warnings")
    return _installed
