"""The conversation endpoint: every route of the wire contract as a DRF view.

Each request is authenticated before its body is read (the view's authentication classes,
by default the configured verifier), then permissions and throttles apply, then the path id
is checked (an unknown or foreign id is ``404 conversation_not_found``), then the body is
validated by a serializer. The shared machinery — wire JSON in and out, errors, the order of
checks, no thread held while waiting — is :class:`poppy_django.api.endpoint.EndpointView`.

A company changes behaviour by subclassing a view and routing its subclass with
:func:`poppy_django.urls.endpoint_urlpatterns`, or by setting the endpoint's DRF classes in
``POPPY`` (``AUTHENTICATION_CLASSES``, ``PERMISSION_CLASSES``, ``THROTTLE_CLASSES``).
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn

from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase, StreamingHttpResponse
from django.template.loader import render_to_string
from django.views import defaults
from rest_framework.request import Request
from rest_framework.response import Response

from poppy_django.api import tail_reads
from poppy_django.api.endpoint import EndpointView, WaitingResponse, routed
from poppy_django.api.schema import endpoint_schema
from poppy_django.api.serializers import MessageBodySerializer, StartBodySerializer
from poppy_django.api.streaming import event_stream_response
from poppy_django.api.throttling import Slot, waiting_slots
from poppy_django.api.wire_errors import unavailable_response
from poppy_django.conf import poppy_settings
from poppy_django.observe import metrics
from poppy_django.observe.dependencies import RETRY_AFTER_SECONDS, unavailable
from poppy_django.service import conversations
from poppy_django.store import ownership, reading, wire
from poppy_django.store.tail import tail
from poppy_django.verifier import Principal


def principal_of(request: Request) -> Principal:
    principal = request.auth
    assert isinstance(principal, Principal), "the endpoint's authentication sets a Principal"
    return principal


def wait_param(request: Request) -> float | None:
    return wire.parse_wait(request.query_params.get("wait"), poppy_settings.WAIT_MAX_SECONDS)


def waiting_slot(principal: Principal, wait: float | None) -> Slot | None:
    """A slot for a read that will wait (``429`` past the limits); none for one that won't."""
    return waiting_slots.acquire(principal) if wait else None


def _write_message(
    request: Request,
    principal: Principal,
    wait: float | None,
    write: Callable[[], conversations.Answer],
) -> tuple[conversations.Answer, int]:
    """Record the message; with ``?wait`` and a ``cursor`` also locate it, in the same
    transaction, so a POST with a bad cursor is refused and writes nothing."""
    if wait is None or request.query_params.get("cursor") is None:
        return write(), 0
    with transaction.atomic():
        answer = write()
        conversation = ownership.get_owned(principal, answer.conversation_id)
        return answer, reading.after_seq(conversation, request.query_params.get("cursor"))


def _post_answer(
    request: Request,
    answer: conversations.Answer,
    wait: float | None,
    after: int,
    slot: Slot | None,
) -> Response:
    """A POST's answer, or with ``?wait`` a read of the events under the POST's status."""
    if wait is None:
        return Response(answer.body, status=answer.status_code)
    cursor = request.query_params.get("cursor")

    async def read() -> dict[str, Any]:
        page = await reading.read_waiting(answer.conversation_id, after, cursor, wait)
        return page.to_wire()

    return WaitingResponse(
        read, status=answer.status_code, cleanup=slot.release if slot is not None else None
    )


def _record(
    request: Request,
    principal: Principal,
    wait: float | None,
    write: Callable[[], conversations.Answer],
) -> Response:
    slot = waiting_slot(principal, wait)
    try:
        answer, after = _write_message(request, principal, wait, write)
    except BaseException:
        if slot is not None:
            slot.release()
        raise
    return _post_answer(request, answer, wait, after, slot)


class ConversationsView(EndpointView):
    """``POST {endpoint}``: start a conversation (a Direct Conversation with a parent)."""

    wire_method = "POST"
    throttle_scope = "conversation_start"

    @endpoint_schema("start")
    def post(self, request: Request) -> Response:
        principal = principal_of(request)
        wait = wait_param(request)
        start = StartBodySerializer(data=self.body(request))
        start.is_valid(raise_exception=True)
        message = start.validated_data["message"]
        parent_id = start.validated_data.get("parent_conversation_id")
        return _record(
            request,
            principal,
            wait,
            lambda: conversations.start(principal, message, parent_id),
        )


class MessagesView(EndpointView):
    """``POST {endpoint}/{id}/messages``: a message in a conversation."""

    wire_method = "POST"
    throttle_scope = "message"

    @endpoint_schema("message")
    def post(self, request: Request, conversation_id: str) -> Response:
        principal = principal_of(request)
        try:
            wait = wait_param(request)
            body = MessageBodySerializer(data=self.body(request))
            body.is_valid(raise_exception=True)
            message = body.validated_data["message"]
        except Exception:
            # The wire answers an unknown or foreign conversation before a bad query or
            # body. A valid request skips this read: the write checks ownership itself.
            ownership.get_owned(principal, conversation_id)
            raise
        if wait is not None:
            ownership.get_owned(principal, conversation_id)  # before a waiting slot's 429
        return _record(
            request,
            principal,
            wait,
            lambda: conversations.post_message(principal, conversation_id, message),
        )


class _ActionView(EndpointView):
    """Handoff and close: a body that may be empty or any JSON, then the operation."""

    wire_method = "POST"

    def operation(self, principal: Principal, conversation_id: str) -> conversations.Answer:
        raise NotImplementedError

    def post(self, request: Request, conversation_id: str) -> Response:
        principal = principal_of(request)
        ownership.get_owned(principal, conversation_id)
        self.body(request)  # only malformed JSON is refused; the content is ignored
        answer = self.operation(principal, conversation_id)
        return Response(answer.body, status=answer.status_code)


class HandoffView(_ActionView):
    """``POST {endpoint}/{id}/handoff``: ask for a person.

    Throttled per caller (scope ``handoff``) and bounded in waiting handoffs per User and per
    client (:mod:`poppy_django.staff.waiting`); every refusal is counted."""

    throttle_scope = "handoff"

    def throttled(self, request: Request, wait: float) -> NoReturn:
        metrics.handoff_refused("rate")
        super().throttled(request, wait)

    def operation(self, principal: Principal, conversation_id: str) -> conversations.Answer:
        return conversations.request_handoff(principal, conversation_id)

    @endpoint_schema("handoff")
    def post(self, request: Request, conversation_id: str) -> Response:
        return super().post(request, conversation_id)


class CloseView(_ActionView):
    """``POST {endpoint}/{id}/close``: close the conversation (again: nothing added)."""

    def operation(self, principal: Principal, conversation_id: str) -> conversations.Answer:
        return conversations.close(principal, conversation_id)

    @endpoint_schema("close")
    def post(self, request: Request, conversation_id: str) -> Response:
        return super().post(request, conversation_id)


def wants_stream(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("Accept", "")


class EventsView(EndpointView):
    """``GET {endpoint}/{id}/events``: a JSON read, a long-poll (``wait``), or the SSE stream.

    A JSON read of a conversation held in the process's tail is answered on the event loop
    before DRF's cycle starts (:mod:`poppy_django.api.tail_reads`); one the view answers from
    the database leaves what it read in the tail.
    """

    wire_method = "GET"

    @classmethod
    def as_view(  # type: ignore[override]
        cls, **initkwargs: Any
    ) -> Callable[..., Awaitable[HttpResponseBase]]:
        """The endpoint's view, answering from the tail first where it can."""
        view = super().as_view(**initkwargs)

        async def events(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if not tail_reads.answers_from_tail(cls, EventsView):
                return await view(request, *args, **kwargs)
            answer = await tail_reads.answer(request, kwargs.get("conversation_id", ""))
            return answer if answer is not None else await view(request, *args, **kwargs)

        return routed(events, cls, initkwargs)

    def _answered(self, snapshot: reading.Snapshot, after: int, cursor: str | None) -> Response:
        """A read answered from ``snapshot``, kept in the tail where later reads may use it."""
        page = reading.page_of(snapshot, after, cursor)
        if tail_reads.answers_from_tail(type(self), EventsView):
            tail.remember(snapshot.conversation, page)
        metrics.read_answered("database")
        return Response(page.to_wire())

    @endpoint_schema("events")
    def get(self, request: Request, conversation_id: str) -> HttpResponseBase:
        principal = principal_of(request)
        stream = wants_stream(request)
        cursor = request.query_params.get("cursor")
        if stream:
            cursor = request.headers.get("Last-Event-ID") or cursor
        # One query: ownership and the cursor's checks, and for a read the page's state and
        # (on PostgreSQL) its events.
        if stream:
            conversation = reading.owned_state(principal, conversation_id)
            after = reading.after_seq(conversation, cursor)
            slot = waiting_slots.acquire(principal)
            return _released_when_done(event_stream_response(conversation_id, after), slot)
        snapshot = reading.owned_snapshot(principal, conversation_id, cursor)
        wait = wait_param(request)
        after = reading.after_seq(snapshot.conversation, cursor)
        if wait:
            slot = waiting_slots.acquire(principal)
            if after < snapshot.conversation.last_seq:
                # Events are already there: the wait would end at once, so answer now, from
                # this query's snapshot, as a read without ``wait`` (nothing to listen for).
                slot.release()
                return self._answered(snapshot, after, cursor)

            async def read() -> dict[str, Any]:
                page = await reading.read_waiting(conversation_id, after, cursor, wait)
                return page.to_wire()

            return WaitingResponse(read, cleanup=slot.release)
        return self._answered(snapshot, after, cursor)


def _released_when_done(response: StreamingHttpResponse, slot: Slot) -> StreamingHttpResponse:
    """The stream's slot is released when it ends or fails, when the response is closed,
    or when it is dropped without ever being read."""
    body = _SlotStream(response.streaming_content, slot)  # type: ignore[arg-type]
    weakref.finalize(body, slot.release)
    response.streaming_content = body
    return response


class _SlotStream:
    """A stream's frames; ``close()`` (which Django calls on the response) releases the slot."""

    def __init__(self, frames: AsyncIterator[bytes], slot: Slot) -> None:
        self._frames = frames
        self._slot = slot

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[bytes]:
        try:
            async for frame in self._frames:
                yield frame
        finally:
            self._slot.release()

    def close(self) -> None:
        self._slot.release()


class NotFoundView(EndpointView):
    """Any other path under the endpoint: ``404 not_found``, whatever the method."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        raise Http404


def server_error(request: HttpRequest) -> HttpResponseBase:
    """``handler500`` for a project's root URLconf: a page or API call that met an outage
    answers 503, never a 500.

    Beside the endpoint (whose errors :func:`~poppy_django.api.wire_errors.wire_error_response`
    answers), the desk, the admin, the authority's pages and APIs and a company's own views
    meet the same outages: the database down or hung, no connection free in the process's
    pool within its timeout, Redis out of reach — in a view or in a middleware (a session
    read). Django calls its ``handler500`` for each, while handling the exception: this one
    answers such an outage ``503`` with ``Retry-After``, a page staff can read (what is out of
    reach; a GET tries again by itself) to a browser and the JSON ``temporarily_unavailable``
    to a script (the desk's own reads, an API client), naming the dependency. Anything else is
    Django's own 500 page.
    """
    exc = sys.exc_info()[1]
    out_of_reach = unavailable(exc) if exc is not None else None
    if exc is None or out_of_reach is None:
        return defaults.server_error(request)
    answer = unavailable_response(out_of_reach, exc)
    if "text/html" not in request.headers.get("Accept", ""):
        return answer
    page = HttpResponse(
        render_to_string(
            "poppy_django/unavailable.html",
            {
                "dependency": out_of_reach.dependency,
                "description": out_of_reach.description(),
                "seconds": RETRY_AFTER_SECONDS,
                "reload": request.method in ("GET", "HEAD"),
            },
        ),
        status=503,
    )
    for header in ("Retry-After", "Cache-Control"):
        page[header] = answer[header]
    return page
