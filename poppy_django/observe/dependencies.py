"""What a failure says about a dependency: the database or Redis out of reach, and in whose words.

A connection-level error is the server's or the driver's account of the connection — "sorry,
too many clients already", "password authentication failed for user …", "Connection
refused", "terminating connection due to administrator command", the pool's "couldn't get a
connection after 5.00 sec" — never a statement's text, its parameters or a row: those come
with errors about a statement (constraint violations, bad input, data errors), which this
module does not recognise. So, narrowly:

- the database: psycopg's ``OperationalError`` and ``InterfaceError`` (psycopg_pool's
  ``PoolTimeout`` is one) with no SQLSTATE (the client's side: connect, a lost connection) or
  one of the classes 08 (connection exception), 28 (authorization), 53 (insufficient
  resources) and 57 (operator intervention: a server shutting down, a statement cancelled);
- Redis: redis-py's ``ConnectionError`` and ``TimeoutError``; the Celery broker: kombu's
  ``OperationalError`` (raised when it cannot connect).

Such an error is logged with its message (:func:`~poppy_django.observe.redaction.describe_failure`),
and an answer that meets it is ``503 temporarily_unavailable`` naming the dependency, not a
500. Every other exception keeps its message withheld.
"""

from __future__ import annotations

from dataclasses import dataclass

#: SQLSTATE classes whose messages describe the connection or the server, never the data.
_SERVER_CLASSES = ("08", "28", "53", "57")
#: The longest message kept (a libpq message is two lines; a hint may follow).
_MOST = 300
#: What an answer tells a client to wait before trying again, in seconds.
RETRY_AFTER_SECONDS = 5


@dataclass(frozen=True)
class Unavailable:
    """A dependency out of reach: which (``"database"``, ``"Redis"``, ``"broker"``), the
    error's class (and SQLSTATE), whether the database's pool timed out waiting for a free
    connection (the database may be fine but busy), and the server's or driver's words."""

    dependency: str
    kind: str
    message: str
    pool_timeout: bool = False

    def description(self) -> str:
        """What a client is told: the dependency and what to do; nothing of the message."""
        if self.pool_timeout:
            return (
                "The database is busy: no connection was free in time. Try again in "
                f"{RETRY_AFTER_SECONDS} seconds."
            )
        named = {"database": "The database", "broker": "The message broker"}
        return (
            f"{named.get(self.dependency, self.dependency)} is unreachable. Try again in "
            f"{RETRY_AFTER_SECONDS} seconds."
        )


def unavailable(exc: BaseException) -> Unavailable | None:
    """The dependency ``exc`` (or an exception it was raised from: Django's database errors
    wrap the driver's) says is out of reach."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 6:
        seen.add(id(current))
        found = _database(current) or _redis(current) or _broker(current)
        if found is not None:
            return found
        current = current.__cause__
    return None


def _words(exc: BaseException) -> str:
    """The message on one line, bounded."""
    text = " ".join(str(exc).split())
    return text if len(text) <= _MOST else text[: _MOST - 1] + "…"


def _kind(exc: BaseException, sqlstate: str | None = None) -> str:
    kind = type(exc)
    name = f"{kind.__module__}.{kind.__qualname__}"
    return f"{name}, SQLSTATE {sqlstate}" if sqlstate else name


def _database(exc: BaseException) -> Unavailable | None:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - SQLite only
        return None
    if not isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return None
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate is not None and sqlstate[:2] not in _SERVER_CLASSES:
        return None
    try:
        from psycopg_pool import PoolTimeout
    except ImportError:  # pragma: no cover - no pool extra
        waited = False
    else:
        waited = isinstance(exc, PoolTimeout)
    return Unavailable("database", _kind(exc, sqlstate), _words(exc), pool_timeout=waited)


def _redis(exc: BaseException) -> Unavailable | None:
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    if isinstance(exc, RedisConnectionError | RedisTimeoutError):
        return Unavailable("Redis", _kind(exc), _words(exc))
    return None


def _broker(exc: BaseException) -> Unavailable | None:
    from kombu.exceptions import OperationalError as BrokerError

    if isinstance(exc, BrokerError):
        return Unavailable("broker", _kind(exc), _words(exc))
    return None
