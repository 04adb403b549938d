"""Drive the real ASGI application in-process: a client that can read a stream and hang up.

Django's ASGI handler cancels a streaming response when the client disconnects; this client
disconnects when ``hang_up(body_so_far)`` says so, which is how SSE readers go away.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync
from django.core.handlers.asgi import ASGIHandler

from poppy_django.client import SSEFrame, iter_sse


@dataclass
class Streamed:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def lines(self) -> list[str]:
        return self.body.decode().split("\n")

    @property
    def frames(self) -> list[SSEFrame]:
        """The SSE frames, parsed by the client's parser (the one every reader uses)."""
        return list(iter_sse(self.lines))

    @property
    def comments(self) -> list[str]:
        """The comment lines (``: keep-alive``), which carry no frame."""
        return [line[1:].strip() for line in self.lines if line.startswith(":")]

    @property
    def stored(self) -> list[dict[str, Any]]:
        """The stored events (frames without an event name)."""
        return [frame.json() for frame in self.frames if frame.event == "message"]


async def _get(
    path: str,
    headers: dict[str, str],
    hang_up: Callable[[bytes], bool] | None,
    hang_up_after: float | None,
    timeout: float,
    opened: threading.Event | None,
) -> Streamed:
    handler = ASGIHandler()
    path, _, query = path.partition("?")
    requested = False
    disconnect = asyncio.Event()
    status = 0
    response_headers: dict[str, str] = {}
    body = bytearray()

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            response_headers.update(
                {k.decode().lower(): v.decode() for k, v in message.get("headers", [])}
            )
        elif message["type"] == "http.response.body":
            body.extend(message.get("body", b""))
            if opened is not None and body.startswith(b":"):
                opened.set()  # the stream's opening comment: it is listening
            if hang_up is not None and hang_up(bytes(body)):
                disconnect.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        + [(b"host", b"testserver")],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    if hang_up_after is not None:
        asyncio.get_running_loop().call_later(hang_up_after, disconnect.set)
    await asyncio.wait_for(handler(scope, receive, send), timeout)
    return Streamed(status, response_headers, bytes(body))


def get(
    path: str,
    headers: dict[str, str],
    *,
    hang_up: Callable[[bytes], bool] | None = None,
    hang_up_after: float | None = None,
    timeout: float = 30,
    opened: threading.Event | None = None,
) -> Streamed:
    """GET through the ASGI handler; returns when the response ends or the client hangs up
    (when ``hang_up(body)`` says so, or after ``hang_up_after`` seconds). ``opened`` is set
    when a stream has opened, i.e. listens for the conversation's wake-ups."""
    return async_to_sync(_get)(path, headers, hang_up, hang_up_after, timeout, opened)
