"""Reads answered on the event loop from the process's tail: no thread, no query.

A JSON read (``GET .../events``, with no ``wait`` or one that has events already) whose
conversation this process holds in its tail (:mod:`poppy_django.store.tail`) is answered
here, before DRF's cycle would take a thread: the verifier's checks without a blocking call
(its ``prepare``), the owner and the cursor checked against the entry, the entry's version
against the fan-out's (a Redis ``GET``, or this process's map), the proof's one use (a Redis
``SET NX``), then the page from memory. Anything else — a stream, a wait with nothing to
answer yet, a refusal, an error, a cursor outside the entry, an entry not current, a view
whose authentication, permissions or throttles a project changed — is answered by the view
itself, as before: this path only ever answers what the view would have answered, a 200.
"""

from __future__ import annotations

import json

from django.core.handlers.asgi import ASGIRequest
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse

from poppy_django import observe
from poppy_django.api.permissions import IsPoppyCaller
from poppy_django.api.rest_framework import EndpointAuthentication, request_info
from poppy_django.api.throttling import PoppyRateThrottle, waiting_slots
from poppy_django.conf import poppy_settings
from poppy_django.errors import PoppyError
from poppy_django.fanout import bus, versions
from poppy_django.observe import metrics, tracing
from poppy_django.process_cache import serving_loop
from poppy_django.store import ownership, wire
from poppy_django.store.tail import tail
from poppy_django.verifier import Prepare

#: The view's hooks a subclass must leave as they are for its reads to be answered here.
HOOKS = (
    "get",
    "initial",
    "dispatch",
    "finalize_response",
    "handle_exception",
    "perform_authentication",
    "check_permissions",
    "check_throttles",
    "authentication_classes_for_endpoint",
    "permission_classes_for_endpoint",
    "throttle_classes_for_endpoint",
)


def answers_from_tail(view: type, base: type) -> bool:
    """Whether ``view`` (``base``, the shipped events view, or a subclass) answers as the
    tail does: the shipped hooks, authentication, permission and throttle classes (the
    throttle has no scope on this route), and a verifier that can ``prepare``."""
    if poppy_settings.TAIL_MAX_BYTES <= 0 or _prepare() is None:
        return False
    if any(getattr(view, name) is not getattr(base, name) for name in HOOKS):
        return False
    return (
        list(view.authentication_classes) == [EndpointAuthentication]  # type: ignore[attr-defined]
        and list(view.permission_classes) == [IsPoppyCaller]  # type: ignore[attr-defined]
        and all(throttle is PoppyRateThrottle for throttle in view.throttle_classes)  # type: ignore[attr-defined]
        and view.throttle_scope is None  # type: ignore[attr-defined]
    )


def _prepare() -> Prepare | None:
    prepare: Prepare | None = getattr(poppy_settings.AUTHENTICATE, "prepare", None)
    return prepare


async def answer(request: HttpRequest, conversation_id: str) -> HttpResponse | None:
    """The read's answer from the tail, or None: the view answers it."""
    if isinstance(request, ASGIRequest):  # served on a loop that outlives the request
        token = serving_loop.set(True)
        try:
            return await _answer(request, conversation_id)
        finally:
            serving_loop.reset(token)
    if bus.over_redis():  # its Redis clients would die with this request's loop
        return None
    return await _answer(request, conversation_id)


async def _answer(request: HttpRequest, conversation_id: str) -> HttpResponse | None:
    """What needs no caller is checked first, so that a read the view must answer costs
    the verifier once."""
    if "text/event-stream" in request.headers.get("Accept", ""):
        return None
    entry = tail.entry(conversation_id)
    prepare = _prepare()
    if entry is None or prepare is None:
        return None
    try:
        wait = wire.parse_wait(request.GET.get("wait"), poppy_settings.WAIT_MAX_SECONDS)
    except PoppyError:
        return None
    cursor = request.GET.get("cursor")
    after = entry.after(cursor)
    if after is None or (wait and after >= entry.state.last_seq):
        return None  # refused, outside the entry, or a wait with nothing yet: the view's
    try:
        if await versions.current_version(entry.key) != entry.version:
            return None
    except Exception:  # Redis out of reach: the view answers as it does then
        return None
    prepared = prepare(request_info(request))
    if prepared is None:
        return None
    principal = prepared.principal
    try:
        ownership.check_owner(principal, entry.state)
        if wait:  # a read that may wait holds a slot; answered at once, it gives it back
            waiting_slots.acquire(principal).release()
    except PoppyError:
        return None
    try:
        if not await prepared.spend():
            return None  # a replayed proof: the view refuses it
    except Exception:
        return None
    request_id = observe.begin_request(request.headers.get("X-Request-ID"))
    tracing.event("identity_checked", outcome="verified", client_id=principal.client_id)
    page = entry.page(after, cursor)
    metrics.read_answered("tail")
    response = HttpResponse(
        json.dumps(page.to_wire(), cls=DjangoJSONEncoder), content_type="application/json"
    )
    response["Cache-Control"] = "no-store"
    response["X-Request-ID"] = request_id
    return response
