"""Sentry's ``before_send`` with the app's redaction: no User text, no token, no proof.

An error event carries what the logs never do: the exception's message (which may quote a
row, so a User's words), each frame's local variables, the request's body and headers
(``Authorization: DPoP <token>``, ``DPoP: <proof>``), breadcrumbs' data. :func:`before_send`
keeps what debugging needs — exception types, frames (file, function, line), the route, the
status, the ids in the app's log lines — and drops or rewrites the rest, as
:mod:`poppy_django.observe.redaction` does for logs::

    sentry_sdk.init(
        dsn=...,
        before_send=poppy_django.observe.sentry.before_send,
        include_local_variables=False,
        max_request_body_size="never",
    )

(docs/operations.md#error-reporting; sentry-sdk is the deployment's dependency, not the app's:
this module never imports it.)
"""

from __future__ import annotations

from typing import Any

from poppy_django.observe.redaction import describe_failure

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
    return event


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
