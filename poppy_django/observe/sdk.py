"""Installing the OpenTelemetry SDK from the standard ``OTEL_*`` environment, when asked.

The app instruments itself through the OpenTelemetry API only; which SDK and exporters run is
the deployment's choice. A deployment that starts its processes under
``opentelemetry-instrument`` (or sets the providers itself) needs nothing from here. One
that would rather not sets ``POPPY["OPENTELEMETRY"] = True`` and configures by the
specification's variables: ``OTEL_TRACES_EXPORTER`` and ``OTEL_METRICS_EXPORTER`` name the
exporters (``otlp`` — over HTTP/protobuf unless ``OTEL_EXPORTER_OTLP_PROTOCOL=grpc`` —,
``console``, ``none``, or any installed under the SDK's entry points;
for metrics also ``prometheus_multiprocess``: :mod:`poppy_django.observe.prometheus`), and
``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_EXPORTER_OTLP_*``,
``OTEL_METRIC_EXPORT_INTERVAL``, ``OTEL_BSP_*`` are read by the SDK itself. Nothing is set
up while neither exporter variable is set, or with ``OTEL_SDK_DISABLED=true``.

Each process configures its own at start-up (:func:`at_start`, from ``apps.ready``), except
a Celery worker, which does when its pool is known (:mod:`poppy_django.tasks`): a prefork
pool's children each configure their own after the fork, and the parent none. A child forked
from a parent whose SDK threads were collecting could inherit their locks held, and hang
collecting forever.
"""

from __future__ import annotations

import logging
import os
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from opentelemetry import metrics, trace

from poppy_django.conf import poppy_settings
from poppy_django.observe import instrumentations
from poppy_django.observe import metrics as app_metrics

logger = logging.getLogger("poppy_django.observe")


def _names(variable: str) -> list[str]:
    value = os.environ.get(variable, "")
    return [name.strip() for name in value.split(",") if name.strip() and name.strip() != "none"]


def _exporter(group: str, name: str) -> Any:
    """An exporter instance by its ``OTEL_*_EXPORTER`` name."""
    if group == "opentelemetry_metrics_exporter":
        # Here: prometheus-client and the SDK are the observability extra's, not the core's.
        from poppy_django.observe import prometheus

        if name == prometheus.EXPORTER_NAME:
            return prometheus.MultiprocessFileExporter()
    if name == "otlp":  # as the specification says: the protocol variable picks the package
        signal = "TRACES" if group == "opentelemetry_traces_exporter" else "METRICS"
        protocol = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or os.environ.get(
            "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
        )
        name = "otlp_proto_grpc" if protocol.strip() == "grpc" else "otlp_proto_http"
    found = entry_points(group=group, name=name)
    if not found:
        raise RuntimeError(f"no OpenTelemetry exporter named {name!r} is installed ({group})")
    return next(iter(found)).load()()


def in_celery_worker() -> bool:
    """Whether this process is a Celery worker's (``celery ... worker``)."""
    program = Path(sys.argv[0]) if sys.argv else Path()
    celery = program.name == "celery" or program.parent.name == "celery"
    return celery and "worker" in sys.argv[1:]


def at_start() -> None:
    """``apps.ready``: configure, unless it is for the Celery worker's signals to do."""
    if not in_celery_worker():
        configure_if_enabled()


def configure_if_enabled() -> None:
    """Configure when ``POPPY["OPENTELEMETRY"]`` says so; then start the counters' series at
    zero under whichever SDK runs (this one, or ``opentelemetry-instrument``'s). Not at
    import: what a counter records before a provider is set is lost."""
    if poppy_settings.OPENTELEMETRY:
        configure()
    app_metrics.start_series()


def configure() -> bool:
    """Install tracer and meter providers as the environment says; whether any was."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    tracing, metering = _names("OTEL_TRACES_EXPORTER"), _names("OTEL_METRICS_EXPORTER")
    if not tracing and not metering:
        return False
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()
    if tracing and not isinstance(trace.get_tracer_provider(), TracerProvider):
        tracer_provider = TracerProvider(resource=resource)
        for name in tracing:
            exporter = _exporter("opentelemetry_traces_exporter", name)
            tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(tracer_provider)
    if metering and not isinstance(metrics.get_meter_provider(), MeterProvider):
        readers = [
            PeriodicExportingMetricReader(_exporter("opentelemetry_metrics_exporter", name))
            for name in metering
        ]
        metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))
    instrumented = instrumentations.instrument()
    logger.info(
        "poppy: OpenTelemetry SDK configured (traces: %s; metrics: %s; instrumentations: %s)",
        ", ".join(tracing) or "off",
        ", ".join(metering) or "off",
        ", ".join(instrumented) or "none",
    )
    return True
