"""The conversation endpoint: every route of the wire contract, in a fixed order of checks.

Each request is authenticated before its body is read, then the path id is checked (an
unknown or foreign id is ``404 conversation_not_found``), then the body is parsed. Views are
async so a waiting reader (``wait``, SSE) holds no thread; the ORM work runs in threads.
Every failure is a JSON body with ``error``, never an HTML page.

Plain async Django views rather than DRF views: the wire pins the order of checks and every
error body exactly, and DRF's negotiation, parsers and exception handler would each have to
be undone. DRF users get :mod:`poppy_django.rest_framework` for their own APIs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from functools import wraps
from typing import Any

from django.core.exceptions import DisallowedHost
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from poppy_django import conversations, observe, reading, wire
from poppy_django.auth import AuthRefusal, Principal, RequestInfo
from poppy_django.auth.public_url import public_url
from poppy_django.conf import poppy_settings
from poppy_django.errors import PoppyError, error_response
from poppy_django.threads import in_thread

logger = logging.getLogger(__name__)

View = Callable[..., Coroutine[Any, Any, HttpResponseBase]]


def endpoint(allowed: str) -> Callable[[View], View]:
    """One route: method check, JSON errors for every refusal, and no caching of answers."""

    def decorate(view: View) -> View:
        @csrf_exempt
        @wraps(view)
        async def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if request.method != allowed:
                response: HttpResponseBase = error_response(
                    "method_not_allowed",
                    f"Use {allowed}.",
                    headers={"Allow": allowed, "Cache-Control": "no-store"},
                )
                return response
            request_id = observe.begin_request(request.headers.get("X-Request-ID"))
            try:
                response = await view(request, *args, **kwargs)
            except PoppyError as exc:  # an AuthRefusal too: its response has its headers
                response = exc.response()
            except DisallowedHost:
                response = error_response("invalid_request", "This host is not served here.")
            except Exception:
                logger.exception("poppy: %s %s failed", request.method, request.path)
                response = error_response("server_error")
            response.setdefault("Cache-Control", "no-store")
            response["X-Request-ID"] = request_id
            return response

        return wrapper

    return decorate


def authenticate(request: HttpRequest) -> Principal:
    """Ask the configured verifier (read per request) who is calling."""
    verifier = poppy_settings.AUTHENTICATE
    if verifier is None:
        raise PoppyError("not_implemented", "No token verifier is configured (POPPY AUTHENTICATE).")
    info: RequestInfo = {
        "method": request.method or "GET",
        "url": public_url(request),
        "headers": {name.lower(): value for name, value in request.headers.items()},
    }
    result = verifier(info)
    if isinstance(result, AuthRefusal):
        raise result
    if not isinstance(result, Principal):
        raise TypeError(f"The verifier returned {type(result).__name__}, not a Principal.")
    return result


def read_body(request: HttpRequest) -> bytes:
    """The body, refused past the limit before and while it is read."""
    limit = poppy_settings.MAX_BODY_BYTES
    too_large = PoppyError("request_too_large", f"Bodies are limited to {limit} bytes.")
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError as exc:
        raise PoppyError("invalid_request", "Content-Length is not a number.") from exc
    if declared > limit:
        raise too_large
    body = request.read(limit + 1)
    if len(body) > limit:
        raise too_large
    return body


def _wait(request: HttpRequest) -> float | None:
    return wire.parse_wait(request.GET.get("wait"), poppy_settings.WAIT_MAX_SECONDS)


def _write_message(
    request: HttpRequest,
    principal: Principal,
    wait: float | None,
    write: Callable[[], conversations.Answer],
) -> tuple[conversations.Answer, int]:
    """Record the message; with ``?wait`` also locate ``cursor``, in the same transaction,
    so a POST with a bad cursor is refused and writes nothing."""
    if wait is None:
        return write(), 0
    with transaction.atomic():
        answer = write()
        conversation = conversations.get_owned(principal, answer.conversation_id)
        return answer, reading.after_seq(conversation, request.GET.get("cursor"))


async def _post_answer(
    request: HttpRequest, answer: conversations.Answer, wait: float | None, after: int
) -> HttpResponseBase:
    """A POST's answer, or with ``?wait`` a read of the events under the POST's status."""
    if wait is None:
        return JsonResponse(answer.body, status=answer.status_code)
    cursor = request.GET.get("cursor")
    page = await reading.read_waiting(answer.conversation_id, after, cursor, wait)
    return JsonResponse(page.to_wire(), status=answer.status_code)


@endpoint("POST")
async def start_conversation(request: HttpRequest) -> HttpResponseBase:
    def write() -> tuple[conversations.Answer, float | None, int]:
        principal = authenticate(request)
        wait = _wait(request)
        body = wire.parse_json_body(read_body(request), required=True)
        parent_id = wire.parse_parent(body)
        message = wire.parse_message(body)
        answer, after = _write_message(
            request, principal, wait, lambda: conversations.start(principal, message, parent_id)
        )
        return answer, wait, after

    answer, wait, after = await in_thread(write)
    return await _post_answer(request, answer, wait, after)


@endpoint("POST")
async def post_message(request: HttpRequest, conversation_id: str) -> HttpResponseBase:
    def write() -> tuple[conversations.Answer, float | None, int]:
        principal = authenticate(request)
        conversations.get_owned(principal, conversation_id)
        wait = _wait(request)
        message = wire.parse_message(wire.parse_json_body(read_body(request), required=True))
        answer, after = _write_message(
            request,
            principal,
            wait,
            lambda: conversations.post_message(principal, conversation_id, message),
        )
        return answer, wait, after

    answer, wait, after = await in_thread(write)
    return await _post_answer(request, answer, wait, after)


async def _act(
    request: HttpRequest,
    conversation_id: str,
    operation: Callable[[Principal, str], conversations.Answer],
) -> HttpResponseBase:
    """Handoff and close: a body that may be empty or any JSON, then the operation."""

    def write() -> conversations.Answer:
        principal = authenticate(request)
        conversations.get_owned(principal, conversation_id)
        wire.parse_json_body(read_body(request), required=False)
        return operation(principal, conversation_id)

    answer = await in_thread(write)
    return JsonResponse(answer.body, status=answer.status_code)


@endpoint("POST")
async def handoff(request: HttpRequest, conversation_id: str) -> HttpResponseBase:
    return await _act(request, conversation_id, conversations.request_handoff)


@endpoint("POST")
async def close(request: HttpRequest, conversation_id: str) -> HttpResponseBase:
    return await _act(request, conversation_id, conversations.close)


def wants_stream(request: HttpRequest) -> bool:
    return "text/event-stream" in request.headers.get("Accept", "")


@endpoint("GET")
async def events(request: HttpRequest, conversation_id: str) -> HttpResponseBase:
    stream = wants_stream(request)
    cursor = request.GET.get("cursor")
    if stream:
        cursor = request.headers.get("Last-Event-ID") or cursor

    def locate() -> tuple[int, float | None]:
        principal = authenticate(request)
        conversation = conversations.get_owned(principal, conversation_id)
        wait = None if stream else _wait(request)
        return reading.after_seq(conversation, cursor), wait

    after, wait = await in_thread(locate)
    if stream:
        from poppy_django.streaming import event_stream_response

        return event_stream_response(conversation_id, after)
    page = await reading.read_waiting(conversation_id, after, cursor, wait or 0.0)
    return JsonResponse(page.to_wire())


@csrf_exempt
async def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
    response = error_response("not_found", "There is nothing at this path.")
    response["Cache-Control"] = "no-store"
    return response
