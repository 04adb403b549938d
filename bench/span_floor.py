"""CPU per read of the OpenTelemetry SDK's span alone, part by part, outside Django (µs).

    .venv/bin/python bench/span_floor.py --part encoded [--requests 20000] [--no-event]
    .venv/bin/python bench/span_floor.py --part otlp --endpoint http://127.0.0.1:4318/v1/traces

Run by ``bench/telemetry_overhead.py --span-floor``. The span is the one a read makes (its
name, kind, four attributes and the identity check's event), on a bare ``TracerProvider``
with no Django, no app code and no metrics, so that each part of what the SDK does with it
is seen alone. Each part adds one step to the one before:

- ``unsampled``: the sampler says no (what one trace in ten costs the other nine);
- ``recorded``: sampled and recorded, given to no processor;
- ``batched``: queued by the ``BatchSpanProcessor`` to an exporter that drops it;
- ``encoded``: that exporter encodes the batch to OTLP protobuf bytes (the SDK's encoder);
- ``otlp``: the SDK's OTLP/HTTP exporter sends it to ``--endpoint``.

Batches are exported (``force_flush``) inside the measured time, as in
``bench/instrumentation_cost.py``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, Tracer

PARTS = ["unsampled", "recorded", "batched", "encoded", "otlp"]
#: Spans made between two exports: under the batch processor's queue (2,048).
FLUSH_EVERY = 500


class Dropping(SpanExporter):
    """Takes a batch and does nothing with it."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class Encoding(SpanExporter):
    """Encodes a batch to the bytes an OTLP exporter would send, and sends nothing."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        encode_spans(spans).SerializeToString()
        return SpanExportResult.SUCCESS


def provider(part: str, endpoint: str | None) -> TracerProvider:
    resource = Resource.create({"service.name": "bench"})
    if part == "unsampled":
        return TracerProvider(resource=resource, sampler=ALWAYS_OFF)
    made = TracerProvider(resource=resource)
    if part == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        made.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    elif part in ("batched", "encoded"):
        made.add_span_processor(BatchSpanProcessor(Encoding() if part == "encoded" else Dropping()))
    return made


def read_span(tracer: Tracer, event: bool = True) -> None:
    """The span a JSON read makes (name, kind, attributes, the identity check's event), made
    on ``tracer`` directly, with none of the app's code."""
    with tracer.start_as_current_span("poppy.request", kind=SpanKind.SERVER) as span:
        if event:
            span.add_event(
                "poppy.identity_checked",
                {"poppy.outcome": "verified", "poppy.client_id": "https://pa.example"},
            )
        span.update_name("GET events")
        span.set_attributes(
            {
                "http.request.method": "GET",
                "http.route": "events",
                "http.response.status_code": 200,
                "poppy.conversation_id": "cnv_0123456789abcdef0123456789",
            }
        )


def measure(part: str, requests: int, event: bool, endpoint: str | None) -> float:
    """CPU µs per read of ``part`` (warmed up first)."""
    made = provider(part, endpoint)
    tracer = made.get_tracer("poppy_django")

    for _ in range(FLUSH_EVERY):
        read_span(tracer, event)
    made.force_flush()
    started = time.process_time()
    for n in range(requests):
        read_span(tracer, event)
        if n % FLUSH_EVERY == FLUSH_EVERY - 1:
            made.force_flush()
    made.force_flush()
    spent = time.process_time() - started
    made.shutdown()
    return spent / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", choices=PARTS, required=True)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--no-event", action="store_true", help="the span without its event")
    parser.add_argument("--endpoint", help="--part otlp: the OTLP/HTTP traces endpoint")
    args = parser.parse_args()
    if args.part == "otlp" and not args.endpoint:
        parser.error("--part otlp needs --endpoint")
    print(measure(args.part, args.requests, not args.no_event, args.endpoint))


if __name__ == "__main__":
    main()
