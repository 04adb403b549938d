"""Set-up mistakes recognised where they surface, with the fix in the words they are told in.

A project that forgot ``manage.py migrate`` fails at its first query; without this module the
endpoint answered ``500 server_error`` and logged an ``OperationalError`` whose message was
withheld, so "no such table" appeared nowhere; :mod:`poppy_django.store.migration_state`
recognises that case for the first-request error and the log (not a system check:
``migrate`` runs the database checks first, so one that fails on an unmigrated database
would stop the very command that fixes it). :func:`redis_hint` names ``REDIS_URL`` when
Redis is out of reach; :func:`host_refusal` words Django's ``DisallowedHost`` for JSON.
"""

from __future__ import annotations

from django.core.exceptions import DisallowedHost

from poppy_django.store.migration_state import unmigrated_hint


def redis_hint(exc: BaseException) -> str | None:
    """For Redis out of reach (a wrong ``REDIS_URL``, a Redis that is down): the fix, naming
    no host (the caller is told too)."""
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError
    except ImportError:  # pragma: no cover - redis is a dependency
        return None
    if not isinstance(exc, RedisConnectionError | RedisTimeoutError):
        return None
    return (
        f"This server cannot reach its Redis ({type(exc).__name__}): check REDIS_URL (the "
        "URL CACHES, CELERY_BROKER_URL and EVENTSTREAM_REDIS are built from) and that Redis "
        "is up."
    )


def server_error_description(exc: BaseException) -> str | None:
    """What a 500 may say about its cause: only set-up mistakes, which are no secret to the
    caller and name the operator's fix; anything else stays a bare ``server_error``."""
    return unmigrated_hint(exc) or redis_hint(exc)


def host_refusal(exc: DisallowedHost) -> str:
    """Django's refusal in words: the host, and the setting that lists the allowed ones."""
    return f"{exc} (DEBUG is False, so only the hosts in ALLOWED_HOSTS are served)."
