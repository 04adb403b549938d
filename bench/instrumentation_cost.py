"""CPU per read of the app's instrumentation alone, in this process (µs, printed).

    .venv/bin/python bench/instrumentation_cost.py [--requests 5000] [--raw]

Run by ``bench/telemetry_overhead.py --instrumentation`` with the SDK off and on. What a JSON
read passes through that differs between the two: ``observe.served.endpoint_request`` (the
request's span, named by its route, with its attributes, and its latency histogram) and the
identity check's span event, around a ready answer: no database, no view, no verifier. With
an SDK, the spans are exported (``force_flush``) inside the measured time, so each read pays
for encoding and sending its own.

``--raw``: the same span (name, kind, attributes, event) made on the tracer directly, with
no histogram and none of the app's code: the SDK's own floor for one span a request.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

#: Spans made between two exports: under the batch processor's queue (2,048), so none is
#: dropped and every one is encoded and sent.
FLUSH_EVERY = 500


def measure(requests: int, raw: bool) -> float:
    """CPU µs per read of the instrumentation alone (``raw``: of its span alone)."""
    import django

    django.setup()
    from django.http import JsonResponse
    from django.test import RequestFactory
    from django.urls import resolve
    from opentelemetry import metrics, trace

    from bench.span_floor import read_span
    from poppy_django.observe import served, tracing

    path = "/poppy/conversations/cnv_0123456789abcdef0123456789/events"
    request = RequestFactory().get(path, {"cursor": "evt_x_1"})
    request.resolver_match = resolve(path)
    answer = JsonResponse({"events": [], "cursor": "evt_x_1"})
    providers = [trace.get_tracer_provider(), metrics.get_meter_provider()]

    def export() -> None:
        for provider in providers:
            if hasattr(provider, "force_flush"):
                provider.force_flush()

    export()
    started = time.process_time()
    for n in range(requests):
        if raw:
            read_span(tracing.tracer)
        else:
            with served.endpoint_request(request) as serving:
                tracing.event(
                    "identity_checked", outcome="verified", client_id="https://pa.example"
                )
                serving.answered(answer)
        if n % FLUSH_EVERY == FLUSH_EVERY - 1:
            export()
    export()
    return (time.process_time() - started) / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--raw", action="store_true", help="the span alone, on the tracer")
    args = parser.parse_args()
    print(measure(args.requests, args.raw))


if __name__ == "__main__":
    main()
