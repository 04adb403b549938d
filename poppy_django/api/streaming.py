"""The SSE stream of a conversation's events, framed exactly as the wire page says.

``id: <event id>`` + ``data: <event JSON>`` for each stored event; ``event: text-delta``
frames (no id) for the pieces of a reply while it is written, always before its complete
message; a ``: keep-alive`` comment after STREAM_KEEPALIVE_SECONDS of silence; the stream
closes after STREAM_MAX_SECONDS and ends after the ``closed`` state event. Waiting holds no
thread: the generator sleeps on a fan-out listener and re-reads the log when nudged (by a
publisher, or by the watchdog that catches lost nudges).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from django.http import StreamingHttpResponse

from poppy_django import fanout
from poppy_django.conf import poppy_settings
from poppy_django.store import reading
from poppy_django.threads import in_thread, release_request_thread


def event_frame(event: dict[str, Any]) -> str:
    return f"id: {event['id']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n"


def delta_frame(delta: fanout.Delta) -> str:
    data = json.dumps({"message_id": delta.message_id, "text": delta.text}, separators=(",", ":"))
    return f"event: text-delta\ndata: {data}\n\n"


KEEP_ALIVE = ": keep-alive\n\n"


def is_closing(event: dict[str, Any]) -> bool:
    return event["type"] == "state" and event.get("status") == "closed"


async def stream_events(conversation_id: str, after: int) -> AsyncIterator[str]:
    """Frames from the event after ``after`` on, until closed or the maximum time."""
    now = time.monotonic()
    deadline = now + poppy_settings.STREAM_MAX_SECONDS
    keepalive = poppy_settings.STREAM_KEEPALIVE_SECONDS
    last_write = now
    completed: set[str] = set()
    release_request_thread()
    async with fanout.listen(conversation_id) as listener:
        # Opening the stream is itself a write, so proxies and clients see it at once.
        yield ": stream opened\n\n"
        read_now = True
        while True:
            if read_now:
                page = await in_thread(reading.read_page, conversation_id, after, None)
                for event in page.events:
                    after = int(event["id"].rpartition("_")[2])
                    if event["type"] == "message":
                        completed.add(event["message"]["id"])
                    yield event_frame(event)
                    last_write = time.monotonic()
                    if is_closing(event):
                        return
                if page.has_more:
                    continue
                if page.status == "closed" and not page.events:
                    return
            now = time.monotonic()
            if now >= deadline:
                return
            listener.seen_seq = after
            timeout = min(deadline - now, max(0.0, last_write + keepalive - now))
            nudged, deltas = await listener.wait(timeout)
            for delta in deltas:
                if delta.message_id not in completed:
                    yield delta_frame(delta)
                    last_write = time.monotonic()
            if time.monotonic() - last_write >= keepalive:
                yield KEEP_ALIVE
                last_write = time.monotonic()
            read_now = nudged


def event_stream_response(conversation_id: str, after: int) -> StreamingHttpResponse:
    response = StreamingHttpResponse(
        stream_events(conversation_id, after), content_type="text/event-stream"
    )
    response["Cache-Control"] = "no-cache"
    # nginx: do not buffer the stream.
    response["X-Accel-Buffering"] = "no"
    return response
