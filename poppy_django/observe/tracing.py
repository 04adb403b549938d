"""The app's traces, through the OpenTelemetry tracing API: a no-op until the deployment
installs an SDK.

A message's trace goes from the endpoint request through the dispatch, the Celery task (its
context in the task's headers), onto the engine's loop (a turn outlives its task: the context
is carried with it, :class:`Carried`), to each model call, tool call and the commit. A read
that returns the reply links to the trace that wrote it (:func:`link_to`).

Span attributes are ids, sizes and outcomes, never what a User wrote; each protocol moment
(a conversation started, a message received, a refusal, an identity check…) is an event on
the span it happened in (:func:`event`), with only the bounded fields of
:data:`EVENT_FIELDS`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from poppy_django.observe.request_id import request_id

tracer = trace.get_tracer("poppy_django")

#: The task header that carries the request id of the message that started a turn.
REQUEST_ID_HEADER = "poppy_request_id"
#: The fields of a moment that become attributes of its span event: ids, counts, durations,
#: outcomes. Anything else a moment says (a reason, a summary) may quote a User.
EVENT_FIELDS = frozenset(
    {
        "conversation_id",
        "turn_id",
        "message_id",
        "parent_id",
        "client_id",
        "request_id",
        "starts_turn",
        "direct",
        "duration",
        "waited",
        "outcome",
        "status",
        "tool",
        "initiator",
        "attempt",
        "code",
        "count",
    }
)


def _attributes(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {
        f"poppy.{key}": value
        for key, value in fields.items()
        if key in EVENT_FIELDS and isinstance(value, str | int | float | bool)
    }


def event(name: str, **fields: Any) -> None:
    """A protocol moment on the current span (nothing without a recording span)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event(f"poppy.{name}", _attributes(fields))


@contextlib.contextmanager
def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    context: otel_context.Context | None = None,
    links: list[Link] | None = None,
    **fields: Any,
) -> Iterator[trace.Span]:
    """A span of the app's work, its attributes from ``fields`` (bounded, as for events);
    an exception marks it failed by type only (its message may quote a User). ``context``:
    its parent's (the current one's by default); ``links``: spans it follows from."""
    with tracer.start_as_current_span(
        name,
        context=context,
        kind=kind,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        if current.is_recording():
            current.set_attributes(_attributes(fields))
        try:
            yield current
        except BaseException as exc:
            if current.is_recording():
                current.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                current.set_attribute("error.type", type(exc).__qualname__)
            raise


def set_fields(current: trace.Span, **fields: Any) -> None:
    if current.is_recording():
        current.set_attributes(_attributes(fields))


# -- carrying a trace and a request id across processes and threads ------------------------


def task_headers() -> dict[str, str]:
    """The headers a dispatched task carries: the trace context and the request id."""
    headers: dict[str, str] = {}
    propagate.inject(headers)
    if (current := request_id.get()) is not None:
        headers[REQUEST_ID_HEADER] = current
    return headers


def restore_ids(headers: Mapping[str, Any]) -> Callable[[], None]:
    """The dispatch's trace context and request id, from a task's headers, current until the
    returned function is called: Celery's ``task_prerun`` to ``task_postrun``, so Celery's
    own lines about the task (its success, its failure) name them too."""
    carrier = {key: value for key, value in headers.items() if isinstance(value, str)}
    token = otel_context.attach(propagate.extract(carrier))
    restored = request_id.set(carrier.get(REQUEST_ID_HEADER))

    def undo() -> None:
        request_id.reset(restored)
        otel_context.detach(token)

    return undo


@contextlib.contextmanager
def task_started(name: str, headers: Mapping[str, Any], **fields: Any) -> Iterator[None]:
    """A task's work: its span a child of the dispatch's, the request id restored."""
    carrier = {key: value for key, value in headers.items() if isinstance(value, str)}
    # Under Celery's instrumentation its task span is current (its parent from the same
    # headers): the app's span goes under it.
    running = trace.get_current_span().is_recording()
    parent = otel_context.get_current() if running else propagate.extract(carrier)
    token = otel_context.attach(parent)
    restored = request_id.set(carrier.get(REQUEST_ID_HEADER))
    try:
        with span(name, kind=SpanKind.INTERNAL if running else SpanKind.CONSUMER, **fields):
            yield
    finally:
        request_id.reset(restored)
        otel_context.detach(token)


@dataclass(frozen=True)
class Carried:
    """What a piece of work takes with it to another thread or loop: the trace context and
    the request id of the message that started it (captured by :func:`carried`)."""

    trace: otel_context.Context
    request_id: str | None

    @contextlib.contextmanager
    def resumed(self) -> Iterator[None]:
        token = otel_context.attach(self.trace)
        restored = request_id.set(self.request_id)
        try:
            yield
        finally:
            request_id.reset(restored)
            otel_context.detach(token)


def carried() -> Carried:
    return Carried(otel_context.get_current(), request_id.get())


def incoming(
    headers: Mapping[str, str], trusted: bool
) -> tuple[otel_context.Context | None, list[Link]]:
    """A request's W3C ``traceparent``, as the parent of its span (``trusted``) or as a link
    from a trace of its own (otherwise): the parent context and the links to start it with.
    Nothing to read (the common case costs one header lookup) without the header."""
    if not headers.get("traceparent"):
        return None, []
    extracted = propagate.extract(headers)
    caller = trace.get_current_span(extracted).get_span_context()
    if not caller.is_valid:
        return None, []
    if trusted:
        return extracted, []
    # A root of our own: an empty context, not the current one (which has no span here).
    return otel_context.Context(), [Link(caller)]


#: The W3C propagator alone: what a message keeps of its request's trace (:func:`origin`).
_W3C = TraceContextTextMapPropagator()


def origin() -> dict[str, str]:
    """The request id and W3C ``traceparent`` of the work being done now, for a message's
    stored ``meta``: a turn taken up later, by another process, names them (:func:`taken_up`)."""
    kept: dict[str, str] = {}
    if (current := request_id.get()) is not None:
        kept["request_id"] = current
    _W3C.inject(kept)
    return kept


@contextlib.contextmanager
def taken_up(meta: Mapping[str, Any]) -> Iterator[list[Link]]:
    """Work resumed from a message's stored :func:`origin` (a turn the recovery sweep took
    up, whose task's headers are gone): the message's request id for the block, where none
    is current, and a link to the message's span, where the current trace is another."""
    links: list[Link] = []
    kept = {key: meta[key] for key in ("traceparent",) if isinstance(meta.get(key), str)}
    if kept:
        stored = trace.get_current_span(_W3C.extract(kept)).get_span_context()
        current = trace.get_current_span().get_span_context()
        if stored.is_valid and stored.trace_id != current.trace_id:
            links.append(Link(stored))
    sent = meta.get("request_id")
    restored = request_id.set(sent) if isinstance(sent, str) and request_id.get() is None else None
    try:
        yield links
    finally:
        if restored is not None:
            request_id.reset(restored)


def link_to(trace_id: int, span_id: int) -> Link:
    """A link to the span that wrote something this span reads."""
    return Link(
        trace.SpanContext(trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(1))
    )


def current_ids() -> tuple[str, str] | None:
    """The current trace and span ids in hex (for log lines and stored links), if any."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"
