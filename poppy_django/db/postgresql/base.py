"""Django's PostgreSQL backend, whose pooled connections are checked within a deadline.

``ENGINE = "poppy_django.db.postgresql"`` with Django's pool (``OPTIONS["pool"]``) and
``CONN_HEALTH_CHECKS``: each connection is checked before it is lent, as Django's pool does,
but the check waits at most libpq's ``connect_timeout`` (``OPTIONS["connect_timeout"]``) for
the server's answer, so a hung database is answered 503 within a bound instead of never.

Why: Django's pool checks a connection with psycopg_pool's check, an empty query whose
answer it awaits without end. A hung server (its processes stopped, a VM paused, a server
stuck on its disk) answers nothing, and its kernel still acknowledges TCP, so no libpq
option ends that wait: keepalive probes are answered and data is acknowledged
(``keepalives``, ``tcp_user_timeout``: measured against a SIGSTOPped server,
docs/deployment.md#a-hung-database). ``connect_timeout`` bounds a new connection only. So
this backend checks the lent connection itself, with the same empty query through psycopg's
libpq wrapper (:mod:`psycopg.pq`), waiting for its answer at most ``connect_timeout`` seconds.
A connection that does not answer in time is given back (the pool closes it) and the request
fails as the database's; one found broken (a server restarted since) is given back and
another one taken, as psycopg_pool's own check does, within the pool's ``timeout``.

Everything else is Django's backend (Django documents subclassing its backends).
"""

from __future__ import annotations

import select
import time
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS
from django.db.backends.postgresql import base
from psycopg import pq

#: Seconds a check waits without ``OPTIONS["connect_timeout"]`` (libpq's own default waits
#: without end).
CHECK_SECONDS = 5.0


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's PostgreSQL backend; with its pool and health checks, checks bounded in time."""

    def __init__(self, settings_dict: dict[str, Any], alias: str = DEFAULT_DB_ALIAS) -> None:
        options = settings_dict.get("OPTIONS") or {}
        #: Whether this backend checks each lent connection (instead of the pool, unbounded).
        self.checks_within: float | None = None
        if options.get("pool") and settings_dict.get("CONN_HEALTH_CHECKS"):
            self.checks_within = float(options.get("connect_timeout") or CHECK_SECONDS)
            settings_dict = {**settings_dict, "CONN_HEALTH_CHECKS": False}  # not the pool's
        super().__init__(settings_dict, alias)

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        if self.checks_within is None:
            return super().get_new_connection(conn_params)
        deadline = time.monotonic() + float(self.pool.timeout)
        while True:
            connection = super().get_new_connection(conn_params)
            try:
                answers_within(connection, self.checks_within)
            except _NoAnswer:
                self.pool.putconn(connection)  # mid-query: the pool closes it
                raise
            except psycopg.Error:
                self.pool.putconn(connection)  # broken: the pool replaces it
                if time.monotonic() >= deadline:
                    raise
                continue
            return connection


class _NoAnswer(psycopg.OperationalError):
    """The server did not answer in time: another connection to it would wait the same."""


def answers_within(connection: psycopg.Connection[Any], seconds: float) -> None:
    """psycopg_pool's check (an empty query) on ``connection``, its answer awaited at most
    ``seconds``; raises :class:`psycopg.OperationalError` when broken or silent."""
    pgconn = connection.pgconn
    deadline = time.monotonic() + seconds
    pgconn.send_query(b"")
    while pgconn.flush():  # the few bytes left to send (the connection is non-blocking)
        _wait(pgconn.socket, deadline, seconds, write=True)
    pgconn.consume_input()
    while pgconn.is_busy():
        _wait(pgconn.socket, deadline, seconds, write=False)
        pgconn.consume_input()
    while (result := pgconn.get_result()) is not None:
        if result.status == pq.ExecStatus.FATAL_ERROR:
            message = (result.error_message or b"").decode(errors="replace").strip()
            raise psycopg.OperationalError(message)


def _wait(socket: int, deadline: float, seconds: float, *, write: bool) -> None:
    """Until ``socket`` is ready (poll: a busy web process has more than select's 1,024
    descriptors), or raise :class:`_NoAnswer` at ``deadline``."""
    poller = select.poll()
    poller.register(socket, select.POLLOUT if write else select.POLLIN)
    left = max(0.0, deadline - time.monotonic())
    if not poller.poll(left * 1000):
        raise _NoAnswer(f"the server did not answer within {seconds:g} s")
