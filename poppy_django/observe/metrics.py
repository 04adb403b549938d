"""The app's metrics, through the OpenTelemetry metrics API: a no-op until the deployment
installs an SDK (``poppy_django.observe.sdk``, or its own).

Every label is bounded: outcomes, error codes, route names, model names, statuses; never a
conversation, user or message id (those go on spans). docs/operations.md lists each metric,
what it means and what to do when its alert fires.

Most turn metrics follow the moments the app already logs (:func:`on_moment`, called by
:func:`~poppy_django.observe.moments.moment` once the moment committed), so what is counted is
what happened, and the engine's code carries no metric calls of its own.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from poppy_django.conf import poppy_settings
from poppy_django.observe import broker_queues, heartbeats, readings

logger = logging.getLogger("poppy_django.observe")

meter = metrics.get_meter("poppy_django")

#: Seconds: a turn's, a model call's or a request's duration (from 5 ms to 10 min).
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 600)

turns_in_flight = meter.create_up_down_counter(
    "poppy.turns.in_flight", unit="{turn}", description="Turns running on this process's engine"
)
turns = meter.create_counter("poppy.turns", unit="{turn}", description="Turns ended, by outcome")
turn_duration = meter.create_histogram(
    "poppy.turn.duration",
    unit="s",
    description="From a turn's start to its reply committed",
    explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
)
turn_start_delay = meter.create_histogram(
    "poppy.turn.start_delay",
    unit="s",
    description="From a message's acknowledgement (201) to the start of the turn answering it",
    explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
)
model_duration = meter.create_histogram(
    "poppy.model.duration",
    unit="s",
    description="One model request, from sending it to the end of its response",
    explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
)
model_tokens = meter.create_counter(
    "poppy.model.tokens", unit="{token}", description="Tokens by model and direction"
)
model_cost = meter.create_counter(
    "poppy.model.cost",
    unit="{currency}",
    description="What the cost hook (POPPY['MODEL_COST']) said the calls cost",
)
lease_take_ups = meter.create_counter(
    "poppy.leases.taken_up",
    unit="{conversation}",
    description="Conversations a recovery sweep took up after their writer died",
)
refusals = meter.create_counter(
    "poppy.refusals", unit="{request}", description="Endpoint requests refused, by error code"
)
request_duration = meter.create_histogram(
    "poppy.request.duration",
    unit="s",
    description="HTTP requests of every route, by route, method and status class",
    explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
)
handoffs_refused = meter.create_counter(
    "poppy.handoffs.refused",
    unit="{handoff}",
    description="Personal agents' handoffs refused, by reason (rate, user_waiting, client_waiting)",
)
dispatch_failures = meter.create_counter(
    "poppy.dispatch.failures",
    unit="{dispatch}",
    description="Turns this process could not hand to its executor (the broker unreachable)",
)

reads = meter.create_counter(
    "poppy.reads",
    unit="{read}",
    description="JSON reads of the events answered at once, by where from (tail, database)",
)


handoffs = meter.create_counter(
    "poppy.handoffs",
    unit="{handoff}",
    description="Handoffs to a person, by what became of them",
)

#: Each counter's outcomes, created at zero when the SDK starts (:func:`start_series`), so
#: ``rate()`` sees the first failure: a series that appears already at 1 shows no increase.
TURN_OUTCOMES = ("answered", "failed", "gave_up", "timed_out", "lease_lost")
HANDOFF_OUTCOMES = ("queued", "joined", "unavailable", "timed_out")
HANDOFF_REFUSALS = ("rate", "user_waiting", "client_waiting")
READ_SOURCES = ("tail", "database")


def start_series() -> None:
    """Every bounded series of the counters, at zero (once an SDK is installed)."""
    for outcome in TURN_OUTCOMES:
        turns.add(0, {"outcome": outcome})
    for outcome in HANDOFF_OUTCOMES:
        handoffs.add(0, {"outcome": outcome})
    for reason in HANDOFF_REFUSALS:
        handoffs_refused.add(0, {"reason": reason})
    for source in READ_SOURCES:
        reads.add(0, {"answered_from": source})
    dispatch_failures.add(0)
    lease_take_ups.add(0)


def turn_outcome(error: str) -> str:
    """A failed turn's bounded reason, from its error (which is never a label itself)."""
    if error.startswith("gave up after"):
        return "gave_up"
    if error.startswith("timed out"):
        return "timed_out"
    return "failed"


def _turn_finished(fields: dict[str, Any]) -> None:
    turns.add(1, {"outcome": "answered"})
    if isinstance(fields.get("duration"), int | float):
        turn_duration.record(fields["duration"], {"outcome": "answered"})


def _turn_started(fields: dict[str, Any]) -> None:
    if isinstance(fields.get("waited"), int | float):
        turn_start_delay.record(fields["waited"])


#: A handoff request's recorded outcome -> the counter's (``no_hook``: no one to ask).
_HANDOFF_REQUESTED = {"queued": "queued", "joined": "joined", "unavailable": "unavailable"}

#: What each moment counts (moments not named here count nothing).
_BY_MOMENT: dict[str, Callable[[dict[str, Any]], None]] = {
    "turn_started": _turn_started,
    "turn_finished": _turn_finished,
    "turn_failed": lambda fields: turns.add(
        1, {"outcome": turn_outcome(str(fields.get("error", "")))}
    ),
    "lease_lost": lambda fields: turns.add(1, {"outcome": "lease_lost"}),
    # A handoff queued for a person, answered at once (joined, or no one to take it), joined
    # from the queue, or given back to the agent past HANDOFF_MAX_WAIT_SECONDS.
    "handoff_requested": lambda fields: handoffs.add(
        1, {"outcome": _HANDOFF_REQUESTED.get(str(fields.get("outcome")), "unavailable")}
    ),
    "human_joined": lambda fields: (
        handoffs.add(1, {"outcome": "joined"}) if fields.get("from_queue") else None
    ),
    "handoff_declined": lambda fields: handoffs.add(1, {"outcome": "unavailable"}),
    "handoff_timed_out": lambda fields: handoffs.add(1, {"outcome": "timed_out"}),
}


def on_moment(name: str, fields: dict[str, Any]) -> None:
    """Count a committed moment (never fails the caller)."""
    record = _BY_MOMENT.get(name)
    if record is None:
        return
    try:
        record(fields)
    except Exception:
        logger.warning("poppy: could not record the metrics of %s", name, exc_info=True)


def model_call(model: str, seconds: float, outcome: str, tokens_in: int, tokens_out: int) -> None:
    """One model request: its latency, its tokens, and its cost by the cost hook."""
    model_duration.record(seconds, {"model": model, "outcome": outcome})
    if tokens_in:
        model_tokens.add(tokens_in, {"model": model, "direction": "input"})
    if tokens_out:
        model_tokens.add(tokens_out, {"model": model, "direction": "output"})
    cost_of = poppy_settings.MODEL_COST
    if cost_of is not None and (tokens_in or tokens_out):
        try:
            cost = cost_of(model, tokens_in, tokens_out)
        except Exception:
            logger.warning("poppy: POPPY['MODEL_COST'] failed for %s", model, exc_info=True)
            return
        if cost:
            model_cost.add(float(cost), {"model": model})


def read_answered(source: str) -> None:
    """A JSON read answered at once: from the process's tail, or from the database."""
    reads.add(1, {"answered_from": source})


def handoff_refused(reason: str) -> None:
    """A personal agent's handoff refused (``429 too_many_requests``): its bounded reason."""
    handoffs_refused.add(1, {"reason": reason})


def request_served(route: str, method: str, status: str, seconds: float, code: str | None) -> None:
    """One request answered (``status``: its class); ``code``: a refusal's, counted."""
    request_duration.record(seconds, {"route": route, "method": method, "status": status})
    if code is not None:
        refusals.add(1, {"code": code, "route": route})


# -- read off the collection (observe.readings), returned by the callbacks ------------------


#: Seconds each statement of the database's gauges may run (PostgreSQL's
#: ``statement_timeout``, for their transaction only): a read stuck behind a lock or on a
#: table too big for its interval fails and says why, instead of holding its thread past the
#: next read.
GAUGE_STATEMENT_TIMEOUT = 5.0
#: Bounds the current transaction's statements to a number of seconds: the store backend's,
#: given by the app's ``ready()`` (the store sits above this package; raw statements are
#: its own).
bound_statements: Callable[[float], None] | None = None


def _read_database() -> dict[str, Any]:
    """The database's gauges, in one go on the reading thread, in one transaction whose
    statements are bounded (:data:`GAUGE_STATEMENT_TIMEOUT`); its connection let go after:
    one read per interval, none kept open between them. The models are imported here: the
    settings' LOGGING imports this package before Django's app registry is ready."""
    from django.db.models import Count, Min, Q

    from poppy_django.models import Conversation, Status

    try:
        with transaction.atomic():
            if bound_statements is not None:
                bound_statements(GAUGE_STATEMENT_TIMEOUT)
            by_status = dict(
                Conversation.objects.order_by().values_list("status").annotate(count=Count("id"))
            )
            queued = Conversation.objects.filter(status=Status.QUEUED).aggregate(
                waiting=Count("id"), oldest=Min("handoff_requested_at")
            )
            # Working with no live writer for longer than a turn may last plus a lease: every
            # one of them is a turn that nothing is answering.
            now = timezone.now()
            bound = timedelta(
                seconds=poppy_settings.TURN_TIMEOUT_SECONDS + poppy_settings.LEASE_SECONDS
            )
            stuck = Conversation.objects.filter(
                Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now),
                status=Status.WORKING,
                updated_at__lt=now - bound,
            ).count()
    finally:
        if not connection.in_atomic_block:
            connection.close()
    oldest: datetime | None = queued["oldest"]
    return {
        "by_status": {status: by_status.get(status, 0) for status in Status.values},
        "handoffs_waiting": queued["waiting"],
        "oldest_handoff": oldest.timestamp() if oldest is not None else None,
        "past_bound": stuck,
    }


readings.reader.add("database", _read_database)
readings.reader.add("broker", broker_queues.depths)


def _database(key: str) -> Any:
    return readings.reader.found("database").get(key)


def _conversations_by_status(options: CallbackOptions) -> Iterable[Observation]:
    counted = _database("by_status") or {}
    return [Observation(count, {"status": status}) for status, count in counted.items()]


def _handoffs_waiting(options: CallbackOptions) -> Iterable[Observation]:
    waiting = _database("handoffs_waiting")
    return [] if waiting is None else [Observation(waiting)]


def _oldest_handoff_wait(options: CallbackOptions) -> Iterable[Observation]:
    """Counted to now from the oldest handoff last read: it keeps growing while reads fail."""
    found = readings.reader.found("database")
    if "oldest_handoff" not in found:
        return []
    oldest = found["oldest_handoff"]
    return [Observation(0.0 if oldest is None else max(0.0, time.time() - oldest))]


def _working_past_bound(options: CallbackOptions) -> Iterable[Observation]:
    stuck = _database("past_bound")
    return [] if stuck is None else [Observation(stuck)]


def _queue_depths(options: CallbackOptions) -> Iterable[Observation]:
    found = readings.reader.found("broker")
    return [Observation(depth, {"queue": queue}) for queue, depth in found.items()]


def _read_times(options: CallbackOptions) -> Iterable[Observation]:
    """Each source's last read in this process, labelled with its id: a process's reads are
    its own (one web process's broker URL can be wrong while the others read it), so where
    the processes' metrics meet each keeps its series, and ``max`` over them is the latest
    read of any. One series for all took the latest collector's value: the wrong process's
    stale time stood for the host's in some scrapes and not in others, by the order the
    processes happened to collect in."""
    pid = str(os.getpid())
    return [
        Observation(at, {"source": name, "pid": pid})
        for name, at in readings.reader.read_times().items()
    ]


meter.create_observable_gauge(
    "poppy.conversations",
    callbacks=[_conversations_by_status],
    unit="{conversation}",
    description="Conversations by status (read from the database: every process says the same)",
)
meter.create_observable_gauge(
    "poppy.handoffs.waiting",
    callbacks=[_handoffs_waiting],
    unit="{conversation}",
    description="Conversations queued for a person",
)
meter.create_observable_gauge(
    "poppy.handoffs.oldest_wait",
    callbacks=[_oldest_handoff_wait],
    unit="s",
    description="How long the longest-waiting handoff has waited",
)
meter.create_observable_gauge(
    "poppy.turns.past_bound",
    callbacks=[_working_past_bound],
    unit="{conversation}",
    description="Conversations working without a live writer past TURN_TIMEOUT + LEASE",
)
meter.create_observable_gauge(
    "poppy.broker.queue_depth",
    callbacks=[_queue_depths],
    unit="{message}",
    description="Messages waiting in the Celery broker's queue (Redis), not yet taken by a worker",
)
meter.create_observable_gauge(
    "poppy.gauges.read_time",
    callbacks=[_read_times],
    unit="s",
    description="When this process last read each source of gauges (database, broker), Unix time",
)


# -- readiness, as this process last answered it --------------------------------------------

#: Each readiness check's last outcome in this process: 1 failing, 0 passing.
_readiness: dict[str, int] = {}


def readiness_answered(outcomes: dict[str, bool]) -> None:
    """The readiness probe answered: each check by name, whether it passed."""
    _readiness.update({name: 0 if ok else 1 for name, ok in outcomes.items()})


def _readiness_failing(options: CallbackOptions) -> Iterable[Observation]:
    """Each check, labelled with this process's id: readiness is a process's own (one web
    process's broker setting can be wrong), so each process keeps its own series where the
    processes' metrics meet (the multiprocess files, a collector), instead of the latest
    collection's answer standing for every process's. Bounded by the live processes: a dead
    one's gauges leave the scrape."""
    pid = str(os.getpid())
    return [
        Observation(failing, {"check": name, "pid": pid}) for name, failing in _readiness.items()
    ]


meter.create_observable_gauge(
    "poppy.readiness.failing",
    callbacks=[_readiness_failing],
    unit="{check}",
    description="1 for each readiness check that failed at this process's last probe, else 0",
)


def _last_heartbeat(options: CallbackOptions) -> Iterable[Observation]:
    """This process's engine's last beat, labelled with its id: each engine beats on its own
    (a prefork worker's children each run one, and one child's heartbeat thread can stand in
    a statement on a hung database while the other's beats on), so where the processes'
    metrics meet each keeps its series, and ``max`` over them is the latest beat of any. One
    series for all took the latest collector's value: a stale engine's beat stood for the
    host's in the scrapes that met its collection last."""
    last = heartbeats.last_beat()
    return [] if last is None else [Observation(last, {"pid": str(os.getpid())})]


meter.create_observable_gauge(
    "poppy.engine.heartbeat_time",
    callbacks=[_last_heartbeat],
    unit="s",
    description="When this process's turn engine last heartbeated (Unix time)",
)
