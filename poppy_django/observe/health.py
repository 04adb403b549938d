"""Is this web process alive, and can it serve: the liveness and readiness probes.

Liveness answers from the process alone (a process that answers is alive; restarting it for
a database outage would not help). Readiness checks, by name, what a request needs: the
database, the app's migrations all applied, the cache, the fan-out's Redis and the Celery
broker (each only where the deployment has one), each with the seconds it took, and answers
503 naming the parts that failed, so a load balancer stops sending requests that would fail
and an operator reads which part to look at. Failures are described without their messages
(:func:`~poppy_django.observe.redaction.describe_failure`): a probe's answer is seen by
whoever can reach it.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.http import HttpRequest, JsonResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from poppy_django.conf import poppy_settings
from poppy_django.observe import metrics
from poppy_django.observe.broker_queues import uses_celery
from poppy_django.observe.redaction import describe_failure

#: The app whose migrations must all be applied for the process to be ready.
APP_LABEL = "poppy_django"
#: Seconds a Redis or broker connection may take before the part counts as unreachable.
CONNECT_TIMEOUT = 2


@dataclass(frozen=True)
class Outcome:
    """One check's result: whether it passed, in how many seconds, and why not."""

    name: str
    ok: bool
    seconds: float
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        answer: dict[str, Any] = {"ok": self.ok, "seconds": round(self.seconds, 4)}
        if self.error is not None:
            answer["error"] = self.error
        return answer


class NotReady(Exception):
    """A check's finding that is not an exception of the part itself (migrations missing)."""


_migrations_on_disk: set[tuple[str, str]] | None = None


def check_migrations() -> None:
    """Every migration of the app on disk is recorded as applied (read from disk once: the
    files do not change under a running process; the record is read each time)."""
    global _migrations_on_disk
    connection = connections[DEFAULT_DB_ALIAS]
    if _migrations_on_disk is None:
        loader = MigrationLoader(None, ignore_no_migrations=True)
        _migrations_on_disk = {key for key in loader.disk_migrations if key[0] == APP_LABEL}
    applied = set(MigrationRecorder(connection).applied_migrations())
    missing = sorted(name for app, name in _migrations_on_disk - applied if app == APP_LABEL)
    if missing:
        raise NotReady(f"{len(missing)} unapplied migration(s) of {APP_LABEL}: {missing[0]}…")


def check_cache() -> None:
    """The default cache stores and returns a value (the throttles and session checks use it)."""
    cache = caches["default"]
    key, value = f"poppy:ready:{secrets.token_hex(4)}", secrets.token_hex(4)
    cache.set(key, value, timeout=10)
    try:
        if cache.get(key) != value:
            raise NotReady("the default cache did not return what was stored")
    finally:
        cache.delete(key)


def check_redis() -> None:
    """The fan-out's Redis (``EVENTSTREAM_REDIS``) answers a PING."""
    import redis

    options = {**settings.EVENTSTREAM_REDIS}
    options.update(socket_connect_timeout=CONNECT_TIMEOUT, socket_timeout=CONNECT_TIMEOUT)
    client = redis.Redis(**options)
    try:
        client.ping()
    finally:
        client.close()


def check_broker() -> None:
    """The Celery broker accepts a connection (turns are dispatched through it)."""
    from celery import current_app

    with current_app.connection_for_write() as connection:
        connection.ensure_connection(max_retries=1, timeout=CONNECT_TIMEOUT)


def checks(database: Callable[[], None]) -> dict[str, Callable[[], None]]:
    """The checks this deployment has, by name, in the order they run."""
    chosen: dict[str, Callable[[], None]] = {
        "database": database,
        "migrations": check_migrations,
        "cache": check_cache,
    }
    if getattr(settings, "EVENTSTREAM_REDIS", None):
        chosen["redis"] = check_redis
    if uses_celery():
        chosen["broker"] = check_broker
    return chosen


def run(name: str, check: Callable[[], None]) -> Outcome:
    started = time.perf_counter()
    try:
        check()
    except NotReady as finding:
        return Outcome(name, False, time.perf_counter() - started, str(finding))
    except Exception as exc:
        return Outcome(
            name, False, time.perf_counter() - started, describe_failure(exc, public=True)
        )
    return Outcome(name, True, time.perf_counter() - started)


class Round:
    """One run of the checks, in a thread of its own, whose outcomes every probe arriving
    while it runs shares: a burst of probes costs one database round trip (one pooled
    connection, given back at the end), and a probe answers within its deadline even when a
    check hangs (a hung database), while that check's thread waits it out alone."""

    def __init__(self, chosen: dict[str, Callable[[], None]]) -> None:
        self._results: dict[str, Outcome] = {}
        self._current: tuple[str, float] | None = None
        self.done = threading.Event()
        thread = threading.Thread(target=self._run, args=(chosen,), name="poppy-readiness")
        thread.daemon = True
        thread.start()

    def _run(self, chosen: dict[str, Callable[[], None]]) -> None:
        try:
            for name, check in chosen.items():
                if name == "migrations" and not self._results["database"].ok:
                    # Read through the database: it would wait out the same failure again.
                    self._results[name] = Outcome(name, False, 0.0, "not checked: no database")
                    continue
                self._current = (name, time.perf_counter())
                self._results[name] = run(name, check)
        finally:
            self._current = None
            connections.close_all()  # this thread's connections: back to the pool
            self.done.set()

    def outcomes(self, names: list[str], within: float) -> list[Outcome]:
        """Each check's outcome once the round ends or ``within`` seconds pass: a check still
        running then has no answer, the ones after it were not reached."""
        self.done.wait(within)
        results, current = dict(self._results), self._current
        answer = []
        for name in names:
            if name in results:
                answer.append(results[name])
            elif current is not None and current[0] == name:
                waited = time.perf_counter() - current[1]
                answer.append(Outcome(name, False, waited, f"no answer within {within:g} s"))
            else:
                answer.append(Outcome(name, False, 0.0, "not reached: a check before hangs"))
        return answer


_round: Round | None = None
_round_lock = threading.Lock()


def shared_round(chosen: dict[str, Callable[[], None]]) -> Round:
    """The round of checks running now in this process, or a new one."""
    global _round
    with _round_lock:
        if _round is None or _round.done.is_set():
            _round = Round(chosen)
        return _round


@never_cache
@require_GET
def liveness(request: HttpRequest) -> JsonResponse:
    """200 while the process answers: nothing outside it is consulted."""
    return JsonResponse({"status": "alive"})


@method_decorator(never_cache, name="dispatch")
class Readiness(View):
    """200 with every check passed, else 503; each check by name with its seconds, from the
    process's shared :class:`Round`, answered within ``POPPY["READINESS_ANSWER_SECONDS"]``
    (6 s): a check still running then (a hung database) is "no answer". Above the database
    pool's wait (``DATABASE_POOL_TIMEOUT``, 5 s in the example project), so a database that
    gives no connection is named by its error; below the orchestrator's probe timeout, so the
    probe reads the answer rather than timing out on its own.

    The database's round trip is the store backend's, given by the URLconf
    (``Readiness.as_view(database=...)``): the store reports its moments and metrics through
    this package, so it sits above it and this module cannot import it.
    """

    http_method_names = ["get"]
    #: Raises when the default database cannot answer.
    database: Callable[[], None] | None = None

    def get(self, request: HttpRequest) -> JsonResponse:
        if self.database is None:
            raise ImproperlyConfigured("Readiness.as_view() needs database=, the round trip")
        chosen = checks(self.database)
        within = poppy_settings.READINESS_ANSWER_SECONDS
        outcomes = shared_round(chosen).outcomes(list(chosen), within)
        ready = all(outcome.ok for outcome in outcomes)
        metrics.readiness_answered({outcome.name: outcome.ok for outcome in outcomes})
        body = {
            "status": "ready" if ready else "not ready",
            "failing": [outcome.name for outcome in outcomes if not outcome.ok],
            "checks": {outcome.name: outcome.as_json() for outcome in outcomes},
        }
        return JsonResponse(body, status=200 if ready else 503)
