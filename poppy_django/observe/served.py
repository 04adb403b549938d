"""An endpoint request measured: its span, its latency by route, its refusal by code.

The route is the URL pattern's name (``messages``, ``events``…), bounded by the URLconf;
a refusal's code is read from the answer's JSON body (only answers of 400 and above,
whose bodies are a few bytes), so a refusal answered anywhere — the verifier, a throttle,
the middleware — is counted by the one code the caller saw, replayed proofs included.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator

from django.http import HttpRequest, HttpResponseBase
from opentelemetry.trace import SpanKind

from poppy_django.conf import poppy_settings
from poppy_django.observe import metrics, tracing

#: The methods a label names as they are (HTTP's and PATCH, as OpenTelemetry's semantic
#: conventions list them); any other is ``_OTHER``, so a client making methods up cannot add
#: a series per request (uvicorn's parser passes any token through).
KNOWN_METHODS = frozenset(
    {"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"}
)
#: The status recorded for a request whose client went away before its answer (a long-poll
#: or a stream hung up): nginx's "client closed request", never a 5xx of the server's.
CLIENT_CLOSED = 499


def bounded_method(method: str | None) -> str:
    return method if method in KNOWN_METHODS else "_OTHER"


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
    method = bounded_method(request.method)
    gone = False
    parent, links = tracing.incoming(request.headers, poppy_settings.TRUST_TRACEPARENT)
    with tracing.span("poppy.request", kind=SpanKind.SERVER, context=parent, links=links) as span:
        try:
            yield served
        except asyncio.CancelledError:
            gone = True  # Django cancels the view when its client disconnects
            raise
        finally:
            match = getattr(request, "resolver_match", None)
            route = (match.url_name if match is not None else None) or "unmatched"
            response = served.response
            if response is not None:
                status = response.status_code
            else:
                status = CLIENT_CLOSED if gone else 500
            code = refusal_code(response) if response is not None else None
            if span.is_recording():
                span.update_name(f"{'HTTP' if method == '_OTHER' else method} {route}")
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
