"""Every HTTP request measured, and the endpoint's traced too.

:func:`request_measured` records each request of every route (the endpoint, the desk, the
admin, the authority's pages, the probes, the metrics) in ``poppy.request.duration``, by
labels bounded whatever the clients send: the route as the URLconf writes it (the matched
pattern, its parameters named as OpenAPI writes them:
``/admin/poppy_django/conversation/{object_id}/change/``; ``unmatched`` for a path no
pattern matched), the method (``_OTHER`` for one HTTP does not define), and the
status class (``2xx`` … ``5xx``; ``499`` for a client that went away before its answer, so a
long-poll it left is never a server error). :func:`endpoint_request` adds the endpoint's
span and counts a refusal by its code, read from the answer's JSON body (only answers of 400
and above, whose bodies are a few bytes), so a refusal answered anywhere — the verifier, a
throttle, the middleware — is counted by the one code the caller saw, replayed proofs
included.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
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
        #: Once measured: the status recorded, and the refusal's code if one was counted.
        self.status = 0
        self.code: str | None = None

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


#: The route label of a path no URL pattern matched.
UNMATCHED = "unmatched"


#: A parameter in a URL pattern: a regex's named group, or a path converter.
_PARAMETER = re.compile(r"\(\?P<(\w+)>[^)]*\)|<(?:\w+:)?(\w+)>")


def route_of(request: HttpRequest) -> str:
    """The matched URL pattern, its parameters written ``{name}`` as OpenAPI writes them
    (``/poppy/conversations/{conversation_id}/messages``, ``/admin/…/{object_id}/change/``)
    and a regex's anchors dropped, or :data:`UNMATCHED`."""
    match = getattr(request, "resolver_match", None)
    route = getattr(match, "route", None)
    if not route:
        return UNMATCHED
    route = _PARAMETER.sub(lambda found: "{" + (found[1] or found[2]) + "}", route)
    return "/" + route.removeprefix("^").removesuffix("$")


def status_class(status: int) -> str:
    """``5xx`` for 503; :data:`CLIENT_CLOSED` kept apart (a client gone, not an answer)."""
    return str(CLIENT_CLOSED) if status == CLIENT_CLOSED else f"{status // 100}xx"


@contextlib.contextmanager
def request_measured(
    request: HttpRequest, served: Served | None = None, *, refusals: bool = False
) -> Iterator[Served]:
    """Measure one request of any route; the caller reports its answer to ``served`` (a new
    one by default; ``refusals``: count a JSON refusal by its code, as the endpoint's are)."""
    served = served or Served()
    started = time.perf_counter()
    gone = False
    try:
        yield served
    except asyncio.CancelledError:
        gone = True  # Django cancels the view when its client disconnects
        raise
    finally:
        response = served.response
        if response is not None:
            served.status = response.status_code
        else:
            served.status = CLIENT_CLOSED if gone else 500
        if refusals and response is not None:
            served.code = refusal_code(response)
        metrics.request_served(
            route_of(request),
            bounded_method(request.method),
            status_class(served.status),
            time.perf_counter() - started,
            served.code,
        )


@contextlib.contextmanager
def endpoint_request(request: HttpRequest) -> Iterator[Served]:
    """Trace and measure one request of the conversation endpoint; the caller reports its
    answer."""
    method = bounded_method(request.method)
    parent, links = tracing.incoming(request.headers, poppy_settings.TRUST_TRACEPARENT)
    with tracing.span("poppy.request", kind=SpanKind.SERVER, context=parent, links=links) as span:
        served = Served()
        try:
            with request_measured(request, served, refusals=True):
                yield served
        finally:
            if span.is_recording():
                match = getattr(request, "resolver_match", None)
                route = (match.url_name if match is not None else None) or UNMATCHED
                span.update_name(f"{'HTTP' if method == '_OTHER' else method} {route}")
                span.set_attributes(
                    {
                        "http.request.method": method,
                        "http.route": route,
                        "http.response.status_code": served.status,
                    }
                )
                if conversation_id := (match.kwargs if match else {}).get("conversation_id"):
                    span.set_attribute("poppy.conversation_id", str(conversation_id)[:64])
                if served.code is not None:
                    tracing.event("refusal", code=served.code)
