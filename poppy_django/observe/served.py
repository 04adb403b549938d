"""An endpoint request measured: its span, its latency by route, its refusal by code.

The route is the URL pattern's name (``messages``, ``events``…), bounded by the URLconf;
a refusal's code is read from the answer's JSON body (only answers of 400 and above,
whose bodies are a few bytes), so a refusal answered anywhere — the verifier, a throttle,
the middleware — is counted by the one code the caller saw, replayed proofs included.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator

from django.http import HttpRequest, HttpResponseBase
from opentelemetry.trace import SpanKind

from poppy_django.observe import metrics, tracing


class Served:
    """What the request was answered with, told by the caller (:meth:`answered`)."""

    def __init__(self) -> None:
        self.response: HttpResponseBase | None = None

    def answered(self, response: HttpResponseBase) -> HttpResponseBase:
        self.response = response
        return response


def refusal_code(response: HttpResponseBase) -> str | None:
    """The ``error`` of a JSON refusal, None for any other answer."""
    if response.status_code < 400 or response.streaming:
        return None
    try:
        body = json.loads(response.content)  # type: ignore[attr-defined]
    except (ValueError, AttributeError):
        return None
    code = body.get("error") if isinstance(body, dict) else None
    return code if isinstance(code, str) and len(code) <= 64 else None


@contextlib.contextmanager
def endpoint_request(request: HttpRequest) -> Iterator[Served]:
    """Measure one request of the conversation endpoint; the caller reports its answer."""
    served = Served()
    started = time.perf_counter()
    method = request.method or "GET"
    with tracing.span("poppy.request", kind=SpanKind.SERVER) as span:
        try:
            yield served
        finally:
            match = getattr(request, "resolver_match", None)
            route = (match.url_name if match is not None else None) or "unmatched"
            response = served.response
            status = response.status_code if response is not None else 500
            code = refusal_code(response) if response is not None else None
            if span.is_recording():
                span.update_name(f"{method} {route}")
                span.set_attributes(
                    {
                        "http.request.method": method,
                        "http.route": route,
                        "http.response.status_code": status,
                    }
                )
                if conversation_id := (match.kwargs if match else {}).get("conversation_id"):
                    span.set_attribute("poppy.conversation_id", str(conversation_id)[:64])
                if code is not None:
                    tracing.event("refusal", code=code)
            metrics.request_served(route, method, status, time.perf_counter() - started, code)
