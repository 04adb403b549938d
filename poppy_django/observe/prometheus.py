"""Prometheus from many processes: each writes its metrics to a file, a scrape adds them up.

A deployment runs several processes per host (``uvicorn --workers N``, Celery's prefork
children), and a scrape reaches one of them. The OpenTelemetry Prometheus exporter serves
the metrics of the process it runs in, so a scrape would see one worker's counters, a
different one each time. This is prometheus-client's multiprocess mode applied to the
OpenTelemetry SDK: :class:`MultiprocessFileExporter` (``OTEL_METRICS_EXPORTER=
prometheus_multiprocess``) writes each process's cumulative metrics to
``$PROMETHEUS_MULTIPROC_DIR/poppy-<pid>.json`` every export interval
(``OTEL_METRIC_EXPORT_INTERVAL``), and :class:`MultiprocessCollector` — behind the
``POPPY["METRICS_PATH"]`` view or ``manage.py poppy_metrics_server`` — adds the files up at
each scrape: counters and histograms of every process that ever wrote (a dead worker's turns
still happened), up-down counters of the live ones only (a dead worker has nothing in flight),
gauges as the live process's that collected last (the database's gauges say the same in every
process), or each live process's own where they carry its ``pid`` (readiness, the gauges' read
times, the engine's heartbeat: what differs between processes).

As with prometheus-client, the directory is per host, shared by the processes there, and
emptied when the deployment starts.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from opentelemetry.sdk.metrics.export import (
    Gauge,
    Histogram,
    HistogramDataPoint,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    NumberDataPoint,
    Sum,
)
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from poppy_django.observe.heartbeats import process_alive

#: The directory's variable, as prometheus-client's multiprocess mode names it.
DIRECTORY_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
#: ``OTEL_METRICS_EXPORTER``'s name for :class:`MultiprocessFileExporter`.
EXPORTER_NAME = "prometheus_multiprocess"


def directory() -> Path:
    configured = os.environ.get(DIRECTORY_VARIABLE)
    if not configured:
        raise RuntimeError(f"{DIRECTORY_VARIABLE} is not set: where should metrics be written?")
    return Path(configured)


class MultiprocessFileExporter(MetricExporter):
    """Writes this process's cumulative metrics to its own file at each export."""

    def __init__(self, folder: Path | None = None) -> None:
        super().__init__()
        self.folder = folder or directory()

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        snapshot = {
            "pid": os.getpid(),
            "written": time.time(),
            "metrics": list(_flattened(metrics_data)),
        }
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, aside = tempfile.mkstemp(dir=self.folder, prefix=".poppy-")
            with os.fdopen(fd, "w") as file:
                json.dump(snapshot, file)
            os.replace(aside, self.folder / f"poppy-{os.getpid()}.json")
        except OSError:
            return MetricExportResult.FAILURE
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


def _kind(data: Any) -> str | None:
    if isinstance(data, Sum):
        return "counter" if data.is_monotonic else "updown"
    if isinstance(data, Gauge):
        return "gauge"
    if isinstance(data, Histogram):
        return "histogram"
    return None  # an exponential histogram: the app configures none


def _point(point: Any) -> dict[str, Any] | None:
    labels = {key: str(value) for key, value in (point.attributes or {}).items()}
    if isinstance(point, HistogramDataPoint):
        return {
            "labels": labels,
            "bounds": list(point.explicit_bounds),
            "counts": list(point.bucket_counts),
            "sum": point.sum,
            "count": point.count,
        }
    if isinstance(point, NumberDataPoint):
        return {"labels": labels, "value": point.value}
    return None


def _flattened(metrics_data: MetricsData) -> Iterator[dict[str, Any]]:
    for resource in metrics_data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                kind = _kind(metric.data)
                if kind is None:
                    continue
                points = [_point(point) for point in metric.data.data_points]
                yield {
                    "name": metric.name,
                    "unit": metric.unit or "",
                    "description": metric.description or "",
                    "kind": kind,
                    "points": [point for point in points if point is not None],
                }


def prometheus_name(name: str, unit: str) -> str:
    """``poppy.turn.duration`` in seconds → ``poppy_turn_duration_seconds``."""
    base = "".join(c if c.isalnum() else "_" for c in name)
    if unit == "s" and not base.endswith("_seconds"):
        base += "_seconds"
    return base


class MultiprocessCollector:
    """A prometheus-client collector adding up the processes' files (see the module)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or directory()

    def collect(self) -> Iterable[Metric]:
        merged: dict[str, dict[str, Any]] = {}
        for path in sorted(self.folder.glob("poppy-*.json")):
            try:
                snapshot = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # being replaced, or gone: the next scrape reads it
            alive = process_alive(int(snapshot.get("pid", 0)))
            written = float(snapshot.get("written", 0))
            for metric in snapshot["metrics"]:
                if metric["kind"] in ("updown", "gauge") and not alive:
                    continue
                into = merged.setdefault(metric["name"], {**metric, "points": {}})
                for point in metric["points"]:
                    key = tuple(sorted(point["labels"].items()))
                    _merge(into, key, {**point, "written": written})
        for metric in merged.values():
            yield _family(metric)


def _merge(into: dict[str, Any], key: tuple[tuple[str, str], ...], point: dict[str, Any]) -> None:
    points: dict[tuple[tuple[str, str], ...], dict[str, Any]] = into["points"]
    have = points.get(key)
    if have is None:
        points[key] = {**point, "counts": list(point.get("counts", []))}
    elif into["kind"] == "histogram":
        if have["bounds"] == point["bounds"]:
            have["counts"] = [a + b for a, b in zip(have["counts"], point["counts"], strict=True)]
            have["sum"] += point["sum"]
            have["count"] += point["count"]
    elif into["kind"] == "gauge":
        if point["written"] > have["written"]:  # the latest process to collect knows best
            have.update(value=point["value"], written=point["written"])
    else:
        have["value"] += point["value"]


def _family(metric: dict[str, Any]) -> Metric:
    name = prometheus_name(metric["name"], metric["unit"])
    description = metric["description"] or metric["name"]
    points = metric["points"]
    labels = sorted({label for key in points for label, _ in key})
    family: Metric
    if metric["kind"] == "counter":
        family = CounterMetricFamily(name, description, labels=labels)
    elif metric["kind"] == "histogram":
        family = HistogramMetricFamily(name, description, labels=labels)
    else:
        family = GaugeMetricFamily(name, description, labels=labels)
    for key, point in sorted(points.items()):
        values = [dict(key).get(label, "") for label in labels]
        if isinstance(family, HistogramMetricFamily):
            cumulative, buckets = 0, []
            for bound, count in zip([*point["bounds"], float("inf")], point["counts"], strict=True):
                cumulative += count
                buckets.append(
                    ("+Inf" if bound == float("inf") else repr(float(bound)), cumulative)
                )
            family.add_metric(values, buckets, point["sum"])
        else:
            family.add_metric(values, point["value"])
    return family


def exposition() -> bytes:
    """The processes' metrics in Prometheus's text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MultiprocessCollector())
    return generate_latest(registry)


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """``POPPY["METRICS_PATH"]``: this host's processes' metrics, for Prometheus to scrape."""
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
