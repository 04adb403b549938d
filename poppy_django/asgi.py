"""``PoppyBodyLimit``: the endpoint's body limit, enforced before Django reads a body.

Django's ASGI handler reads a request's whole body (spooling it to a temporary file past
``FILE_UPLOAD_MAX_MEMORY_SIZE``) before any middleware or view runs, so a view cannot refuse
a large body before it has been received. This wrapper sits in front of Django, in the
project's ``asgi.py``::

    application = PoppyBodyLimit(get_asgi_application())

On the endpoint's paths it answers ``413 request_too_large`` (JSON, ``Connection: close``)
without calling Django when ``Content-Length`` declares more than ``POPPY["MAX_BODY_BYTES"]``,
and counts a body sent without a length (chunked) as it arrives: at the first byte over
the limit it answers 413 and tells Django the client went away, so the rest is never read.
Every other path is passed through untouched.

It also runs each endpoint request on a request thread lent from a pool
(:func:`poppy_django.threads.lent_request_thread`) instead of the two threads Django's
handler starts and joins for every request.

It also speaks the ASGI **lifespan** protocol, which Django's handler refuses (uvicorn then
prints "ASGI 'lifespan' protocol appears unsupported." at every start): startup and
shutdown are acknowledged, so servers start quietly with their default ``--lifespan auto``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from django.conf import settings

from poppy_django.addresses import is_endpoint_path
from poppy_django.conf import poppy_settings
from poppy_django.errors import error_response
from poppy_django.threads import lent_request_thread

Scope = dict[str, Any]
Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Longer than any byte count this process could hold: refused without parsing it.
_MAX_LENGTH_DIGITS = 18


class PoppyBodyLimit:
    """ASGI middleware: endpoint bodies over the limit are refused before they are read."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http" or not is_endpoint_path(_path_info(scope)):
            await self.app(scope, receive, send)
            return
        limit: int = poppy_settings.MAX_BODY_BYTES
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await _refuse(send, limit)
            return
        async with lent_request_thread():
            await self.app(scope, *_counting(receive, send, limit))


async def _lifespan(receive: Receive, send: Send) -> None:
    """Acknowledge startup and shutdown: nothing to prepare, Django sets itself up lazily."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _counting(receive: Receive, send: Send, limit: int) -> tuple[Receive, Send]:
    """A receive that stops the body at the limit, and a send that then stays quiet."""
    received = 0
    refused = False

    async def limited_receive() -> Message:
        nonlocal received, refused
        if refused:
            return {"type": "http.disconnect"}
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                refused = True
                await _refuse(send, limit)
                # The application stops as for a client that left (Django: RequestAborted).
                return {"type": "http.disconnect"}
        return message

    async def guarded_send(message: Message) -> None:
        if not refused:
            await send(message)

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


async def _refuse(send: Send, limit: int) -> None:
    body = error_response("request_too_large", f"Bodies are limited to {limit} bytes.").content
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
