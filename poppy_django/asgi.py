"""``PoppyBodyLimit``: every channel's body limit, enforced before Django reads a body.

Django's ASGI handler reads a request's whole body (spooling it to a temporary file past
``FILE_UPLOAD_MAX_MEMORY_SIZE``) before any middleware or view runs, so a view cannot refuse
a large body before it has been received. This wrapper sits in front of Django, in the
project's ``asgi.py``::

    application = PoppyBodyLimit(get_asgi_application())

On the endpoint's paths (limit ``POPPY["MAX_BODY_BYTES"]``) and the other channels' routes
(``POPPY["BODY_LIMITS"]``, by route: MCP, operations, feedback, Mediated Sign-In, browser
sessions, the authority's token and sign-in pages; :func:`route_kind` tells which) it
answers ``413 request_too_large`` (JSON, ``Connection: close``) without calling Django when
``Content-Length`` declares more than the route's limit, and counts a body sent without a
length (chunked) as it arrives: at the first byte over the limit it answers 413 and tells
Django the client went away, so the rest is never read. A body that has not arrived whole
within ``POPPY["BODY_READ_SECONDS"]`` is answered ``408 request_timeout`` the same way: a
client that never finishes is not waited on. Every other path is passed through untouched.

It also runs each endpoint request on a request thread lent from a pool
(:func:`poppy_django.threads.lent_request_thread`) instead of the two threads Django's
handler starts and joins for every request: lent at its first thread-sensitive call, and
for a read (``GET``) not at all for Django's ``request_started`` and ``request_finished``,
whose moments this wrapper marks, when their receivers may run on the event loop
(:class:`poppy_django.threads.RequestExecutor`). Each request of MCP, feedback, Mediated
Sign-In, browser sessions and the authority runs on one of at most
``POPPY["CHANNEL_THREADS"]`` lent threads (:class:`poppy_django.threads.ChannelThreads`;
more wait, holding none): their database connections are bounded by that setting, not by a
burst of clients (with Django's connection pool, ``OPTIONS["pool"]``, every route's are
bounded by the pool's ``max_size``).

It also speaks the ASGI **lifespan** protocol, which Django's handler refuses (uvicorn then
prints "ASGI 'lifespan' protocol appears unsupported." at every start): startup and
shutdown are acknowledged, so servers start quietly with their default ``--lifespan auto``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.core.signals import request_finished, request_started
from django.urls import Resolver404, resolve

from poppy_django.addresses import is_endpoint_path
from poppy_django.conf import DEFAULTS, poppy_settings
from poppy_django.errors import error_response
from poppy_django.threads import RequestExecutor, channel_threads, lent_request_thread

Scope = dict[str, Any]
Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Longer than any byte count this process could hold: refused without parsing it.
_MAX_LENGTH_DIGITS = 18
#: URL namespace (and route name) -> the route kind whose limit applies (``BODY_LIMITS``).
_KINDS: dict[tuple[str | None, str | None], str] = {
    ("poppy_mcp", "server"): "mcp",
    ("poppy_operations", None): "operations",
    ("poppy_django", "feedback"): "feedback",
    ("poppy_authority", "mediated"): "sign_in",
    ("poppy_authority", "mediated-code"): "sign_in",
    ("poppy_authority", "browser-session"): "browser_session",
    ("poppy_authority", None): "authority",
}

#: The methods of the endpoint's reads, whose request signals may run on the event loop.
_READS = frozenset({"GET", "HEAD"})
#: The route kinds whose requests are short (no waiting): run on the bounded channel threads.
_BOUNDED_KINDS = frozenset({"mcp", "feedback", "sign_in", "browser_session", "authority"})


def route_kind(path_info: str) -> str | None:
    """``"endpoint"``, a ``BODY_LIMITS`` key, or None for a path no limit here covers."""
    if is_endpoint_path(path_info):
        return "endpoint"
    try:
        match = resolve(path_info)
    except Resolver404:
        return None
    namespace = match.namespaces[0] if match.namespaces else None
    return _KINDS.get((namespace, match.url_name)) or _KINDS.get((namespace, None))


def body_limit(kind: str) -> int:
    """The most bytes a body of a ``kind`` route may have."""
    if kind == "endpoint":
        return poppy_settings.MAX_BODY_BYTES
    limits = {**DEFAULTS["BODY_LIMITS"], **poppy_settings.BODY_LIMITS}
    return int(limits[kind])


class PoppyBodyLimit:
    """ASGI middleware: channel bodies over their limit, or too slow to arrive, are refused
    before they are read."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        #: Django's handler class when it is the application wrapped (the sender of its
        #: request signals, which may then run on the loop: RequestExecutor), else None.
        self._handler_class = type(app) if isinstance(app, ASGIHandler) else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        kind = route_kind(_path_info(scope)) if scope["type"] == "http" else None
        if kind is None:
            await self.app(scope, receive, send)
            return
        limit = body_limit(kind)
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await _refuse(send, "request_too_large", f"Bodies are limited to {limit} bytes.")
            return
        seconds = float(poppy_settings.BODY_READ_SECONDS)
        if kind == "endpoint":
            # A read's request signals may run on the loop; a POST keeps its hops (measured:
            # RequestExecutor).
            reading = scope.get("method") in _READS
            sender = self._handler_class if reading else None
            async with lent_request_thread(sender=sender) as executor:
                await self.app(scope, *_counting(receive, send, limit, seconds, executor))
        elif kind in _BOUNDED_KINDS:
            async with channel_threads(poppy_settings.CHANNEL_THREADS).lent():
                await self.app(scope, *_counting(receive, send, limit, seconds))
        else:
            await self.app(scope, *_counting(receive, send, limit, seconds))


async def _lifespan(receive: Receive, send: Send) -> None:
    """Acknowledge startup and shutdown: nothing to prepare, Django sets itself up lazily."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _counting(
    receive: Receive,
    send: Send,
    limit: int,
    seconds: float,
    executor: RequestExecutor | None = None,
) -> tuple[Receive, Send]:
    """A receive that stops the body at the limit or the deadline, and a send that then
    stays quiet; with the request's ``executor``, what each tells Django's handler does next:
    once the body is in, it sends ``request_started``; once the response is out, it closes it
    (``request_finished``)."""
    received = 0
    refused = False
    complete = False
    deadline = time.monotonic() + seconds

    async def refuse(code: str, description: str) -> Message:
        nonlocal refused
        refused = True
        await _refuse(send, code, description)
        # The application stops as for a client that left (Django: RequestAborted).
        return {"type": "http.disconnect"}

    async def limited_receive() -> Message:
        nonlocal received, complete
        if refused:
            return {"type": "http.disconnect"}
        if complete:  # the body is in: what follows is only a disconnect, waited for freely
            return await receive()
        try:
            message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            return await refuse("request_timeout", "The body did not arrive in time.")
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            complete = not message.get("more_body", False)
            if received > limit:
                return await refuse("request_too_large", f"Bodies are limited to {limit} bytes.")
            if complete and executor is not None:
                executor.signal_next(request_started)
        return message

    async def guarded_send(message: Message) -> None:
        if refused:
            return
        await send(message)
        if (
            executor is not None
            and message["type"] == "http.response.body"
            and not message.get("more_body", False)
        ):
            executor.signal_next(request_finished)

    return limited_receive, guarded_send


def _path_info(scope: Scope) -> str:
    """The path below the script prefix, as Django's ASGI handler computes it."""
    path: str = scope.get("path", "")
    prefix = settings.FORCE_SCRIPT_NAME or scope.get("root_path", "")
    if prefix and path.startswith(prefix):
        return path[len(prefix) :] or "/"
    return path


def _declared_length(scope: Scope) -> int | None:
    """The ``Content-Length`` the client declared; None if absent or not a plain number."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            if not value.isdigit():
                return None  # the server or the view refuses it as malformed
            if len(value) > _MAX_LENGTH_DIGITS:
                return 10**_MAX_LENGTH_DIGITS
            return int(value)
    return None


async def _refuse(send: Send, code: str, description: str) -> None:
    response = error_response(code, description)
    body = response.content
    await send(
        {
            "type": "http.response.start",
            "status": response.status_code,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
