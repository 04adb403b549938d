"""Sentry's ``before_send`` and ``before_send_transaction`` with the app's redaction: no User
text, no token, no proof.

An error event carries what the logs never do: the exception's message (which may quote a
row, so a User's words), each frame's local variables, the request's body and headers
(``Authorization: DPoP <token>``, ``DPoP: <proof>``), breadcrumbs' data. :func:`before_send`
keeps what debugging needs — exception types, frames (file, function, line), the route, the
status, the request and trace ids the app's log lines carry (as tags) — and drops or
rewrites the rest, as :mod:`poppy_django.observe.redaction` does for logs. A transaction
(with tracing on, ``traces_sample_rate``) carries the request's headers too, and its spans'
data: :func:`before_send_transaction` empties them the same way::

    sentry_sdk.init(
        dsn=...,
        before_send=poppy_django.observe.sentry.before_send,
        before_send_transaction=poppy_django.observe.sentry.before_send_transaction,
        send_default_pii=False,
        include_local_variables=False,
        max_request_body_size="never",
    )

An endpoint request that fails unexpectedly answers ``500 server_error`` and sends Django's
``got_request_exception``, which Sentry's Django integration captures: an event with the
exception, its stack and the request id.

(docs/operations.md#error-reporting; sentry-sdk is the deployment's dependency, not the app's:
this module never imports it.)
"""

from __future__ import annotations

from typing import Any

from poppy_django.observe import tracing
from poppy_django.observe.redaction import describe_failure
from poppy_django.observe.request_id import request_id

#: Request headers an event keeps: none that authenticates or identifies a caller.
KEPT_HEADERS = frozenset({"Accept", "Content-Type", "Content-Length", "User-Agent", "Host"})


def before_send(event: dict[str, Any], hint: dict[str, Any]) -> dict[str, Any]:
    """The event with every place that can hold a User's text or a secret emptied."""
    _exceptions(event, hint)
    _request(event)
    for crumb in (event.get("breadcrumbs") or {}).get("values", []):
        crumb.pop("data", None)  # an HTTP breadcrumb's URL and body, a query's parameters
    for key in ("extra", "user"):
        event.pop(key, None)
    _ids(event)
    return event


def before_send_transaction(event: dict[str, Any], hint: dict[str, Any]) -> dict[str, Any]:
    """A transaction with its request's headers, body, cookies and query emptied, and its
    spans' and breadcrumbs' data (an HTTP client span's URL and headers, a query's
    parameters) dropped; the route, status, timings and ids stay."""
    _request(event)
    for span in event.get("spans") or []:
        if isinstance(span, dict):
            span.pop("data", None)
    for crumb in (event.get("breadcrumbs") or {}).get("values", []):
        crumb.pop("data", None)
    for key in ("extra", "user"):
        event.pop(key, None)
    _ids(event)
    return event


def _ids(event: dict[str, Any]) -> None:
    """The request and trace ids the app's log lines carry, as the event's tags: an event
    found in Sentry leads to the request's log lines and its trace."""
    tags = event.get("tags")
    if not isinstance(tags, dict):
        tags = event["tags"] = {}
    if (current := request_id.get()) is not None:
        tags.setdefault("request_id", current)
    if (ids := tracing.current_ids()) is not None:
        tags.setdefault("otel_trace_id", ids[0])


def _exceptions(event: dict[str, Any], hint: dict[str, Any]) -> None:
    chain: list[BaseException] = []
    exc_info = hint.get("exc_info")
    current = exc_info[1] if exc_info else None
    while current is not None and len(chain) < 20:
        chain.append(current)
        current = current.__cause__ or current.__context__
    by_type = {type(exc).__name__: describe_failure(exc) for exc in reversed(chain)}
    for value in (event.get("exception") or {}).get("values", []):
        value["value"] = by_type.get(str(value.get("type")), "(message withheld)")
        for frame in (value.get("stacktrace") or {}).get("frames", []):
            frame.pop("vars", None)
    for thread in (event.get("threads") or {}).get("values", []):
        for frame in (thread.get("stacktrace") or {}).get("frames", []):
            frame.pop("vars", None)


def _request(event: dict[str, Any]) -> None:
    request = event.get("request")
    if not isinstance(request, dict):
        return
    for key in ("data", "cookies", "query_string", "env"):
        request.pop(key, None)
    headers = request.get("headers")
    if isinstance(headers, dict):
        request["headers"] = {
            name: value for name, value in headers.items() if name.title() in KEPT_HEADERS
        }
