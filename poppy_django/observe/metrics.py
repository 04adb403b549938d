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
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone
from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from poppy_django.conf import poppy_settings
from poppy_django.observe import heartbeats

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
    description="Endpoint requests, by route, method and status",
    explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
)
dispatch_failures = meter.create_counter(
    "poppy.dispatch.failures",
    unit="{dispatch}",
    description="Turns this process could not hand to its executor (the broker unreachable)",
)


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


#: What each moment counts (moments not named here count nothing).
_BY_MOMENT: dict[str, Callable[[dict[str, Any]], None]] = {
    "turn_started": _turn_started,
    "turn_finished": _turn_finished,
    "turn_failed": lambda fields: turns.add(
        1, {"outcome": turn_outcome(str(fields.get("error", "")))}
    ),
    "lease_lost": lambda fields: turns.add(1, {"outcome": "lease_lost"}),
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


def request_served(route: str, method: str, status: int, seconds: float, code: str | None) -> None:
    request_duration.record(seconds, {"route": route, "method": method, "status": status})
    if code is not None:
        refusals.add(1, {"code": code, "route": route})


# -- read from the database when the SDK collects ------------------------------------------


class _FailingGauges:
    """The database gauges whose last read failed, told once a streak: a database that is
    down, or not migrated yet, is logged when the first gauge starts failing and when the
    last reads again, not at every gauge of every collection of every process. A gauge that
    fails while the others read keeps the streak open rather than ending it each time."""

    def __init__(self) -> None:
        self.failing: set[str] = set()
        self.since: datetime | None = None

    def failed(self, gauge: str) -> None:
        if not self.failing:
            self.since = timezone.now()
            logger.warning(
                "poppy: could not read the database's gauges (not logged again until they read)",
                exc_info=True,
            )
        else:
            logger.debug("poppy: the database's gauge %s still fails", gauge, exc_info=True)
        self.failing.add(gauge)

    def read(self, gauge: str) -> None:
        if gauge in self.failing:
            self.failing.discard(gauge)
            if not self.failing:
                logger.info(
                    "poppy: the database's gauges read again (failing since %s)", self.since
                )


_failing_gauges = _FailingGauges()


def _database_gauge(
    read: Callable[[], Iterable[Observation]],
) -> Callable[[CallbackOptions], Iterable[Observation]]:
    """A gauge's callback: the SDK's collecting thread reads the database, then lets its
    connection go (one read per collection, none kept open between them)."""

    def callback(options: CallbackOptions) -> Iterable[Observation]:
        try:
            observed = list(read())
        except Exception:
            _failing_gauges.failed(read.__name__)
            return []
        finally:
            if not connection.in_atomic_block:
                connection.close()
        _failing_gauges.read(read.__name__)
        return observed

    return callback


# The gauges import the models when they read: the settings' LOGGING imports this package
# (its filters) before Django's app registry is ready, and the models need it.


def _conversations_by_status() -> Iterable[Observation]:
    from django.db.models import Count

    from poppy_django.models import Conversation, Status

    counted = dict(
        Conversation.objects.order_by().values_list("status").annotate(count=Count("id"))
    )
    return [Observation(counted.get(status, 0), {"status": status}) for status in Status.values]


def _handoffs() -> tuple[int, datetime | None]:
    from django.db.models import Count, Min

    from poppy_django.models import Conversation, Status

    queued = Conversation.objects.filter(status=Status.QUEUED).aggregate(
        waiting=Count("id"), oldest=Min("handoff_requested_at")
    )
    return queued["waiting"], queued["oldest"]


def _handoffs_waiting() -> Iterable[Observation]:
    return [Observation(_handoffs()[0])]


def _oldest_handoff_wait() -> Iterable[Observation]:
    oldest = _handoffs()[1]
    waited = (timezone.now() - oldest).total_seconds() if oldest is not None else 0.0
    return [Observation(max(0.0, waited))]


def _working_past_bound() -> Iterable[Observation]:
    """Conversations working with no live writer for longer than a turn may last plus a
    lease: every one of them is a turn that nothing is answering."""
    from django.db.models import Q

    from poppy_django.models import Conversation, Status

    now = timezone.now()
    bound = timedelta(seconds=poppy_settings.TURN_TIMEOUT_SECONDS + poppy_settings.LEASE_SECONDS)
    stuck = Conversation.objects.filter(
        Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now),
        status=Status.WORKING,
        updated_at__lt=now - bound,
    ).count()
    return [Observation(stuck)]


meter.create_observable_gauge(
    "poppy.conversations",
    callbacks=[_database_gauge(_conversations_by_status)],
    unit="{conversation}",
    description="Conversations by status (read from the database: every process says the same)",
)
meter.create_observable_gauge(
    "poppy.handoffs.waiting",
    callbacks=[_database_gauge(_handoffs_waiting)],
    unit="{conversation}",
    description="Conversations queued for a person",
)
meter.create_observable_gauge(
    "poppy.handoffs.oldest_wait",
    callbacks=[_database_gauge(_oldest_handoff_wait)],
    unit="s",
    description="How long the longest-waiting handoff has waited",
)
meter.create_observable_gauge(
    "poppy.turns.past_bound",
    callbacks=[_database_gauge(_working_past_bound)],
    unit="{conversation}",
    description="Conversations working without a live writer past TURN_TIMEOUT + LEASE",
)


def _last_heartbeat(options: CallbackOptions) -> Iterable[Observation]:
    last = heartbeats.last_beat()
    return [] if last is None else [Observation(last)]


meter.create_observable_gauge(
    "poppy.engine.heartbeat_time",
    callbacks=[_last_heartbeat],
    unit="s",
    description="When this process's turn engine last heartbeated (Unix time)",
)
