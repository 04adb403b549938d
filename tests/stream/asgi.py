"""Drive the real ASGI application in-process: a client that can read a stream and hang up.

Django's ASGI handler cancels a streaming response when the client disconnects; this client
disconnects when ``hang_up(body_so_far)`` says so, which is how SSE readers go away.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from django.core.handlers.asgi import ASGIHandler


@dataclass
class Frame:
    event: str | None = None
    id: str | None = None
    data: Any = None
    comment: str | None = None


@dataclass
class Streamed:
    status: int
    headers: dict[str, str]
    body: bytes
    frames: list[Frame] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def stored(self) -> list[dict[str, Any]]:
        """The stored events (frames with an id)."""
        return [f.data for f in self.frames if f.comment is None and f.event is None]


def parse_frames(body: bytes) -> list[Frame]:
    frames = []
    for block in body.decode().split("\n\n"):
        if not block.strip():
            continue
        frame = Frame()
        data_lines = []
        for line in block.split("\n"):
            if line.startswith(":"):
                frame.comment = line[1:].strip()
            else:
                name, _, value = line.partition(": ")
                if name == "event":
                    frame.event = value
                elif name == "id":
                    frame.id = value
                elif name == "data":
                    data_lines.append(value)
        if data_lines:
            frame.data = json.loads("\n".join(data_lines))
        frames.append(frame)
    return frames


async def _get(
    path: str,
    headers: dict[str, str],
    hang_up: Callable[[bytes], bool] | None,
    hang_up_after: float | None,
    timeout: float,
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
    result = Streamed(status, response_headers, bytes(body))
    if response_headers.get("content-type", "").startswith("text/event-stream"):
        result.frames = parse_frames(result.body)
    return result


def get(
    path: str,
    headers: dict[str, str],
    *,
    hang_up: Callable[[bytes], bool] | None = None,
    hang_up_after: float | None = None,
    timeout: float = 30,
) -> Streamed:
    """GET through the ASGI handler; returns when the response ends or the client hangs up
    (when ``hang_up(body)`` says so, or after ``hang_up_after`` seconds)."""
    return async_to_sync(_get)(path, headers, hang_up, hang_up_after, timeout)
