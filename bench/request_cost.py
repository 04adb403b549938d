"""Server CPU per request of the endpoint, in-process: POST messages and JSON reads.

    DATABASE_URL=postgres://... REDIS_URL=redis://... DJANGO_DEBUG=0 POPPY_DEV_AUTHORITY=0 \\
    POPPY_AUTHENTICATE=poppy_django.verifier.fake.verify POPPY_ALLOW_FAKE_VERIFIER=1 \\
    POPPY_LOG_LEVEL=WARNING \\
    .venv/bin/python bench/request_cost.py [--requests 200] [--poppy '{"THROTTLE_CLASSES": []}']

Sends ``--requests`` context-only POST messages (they start no turn), as many text POST
messages (each dispatches a turn: with ``REDIS_URL``, a Celery publish that no worker takes
here; the conversation stays ``working``) and as many JSON reads (``cursor`` 4 events before
the end) through Django's ``ASGIHandler`` in this process, and
prints ``time.process_time()`` and wall time per request as JSON. CPU time over all threads
is steadier than wall time on a shared machine. To compare two versions, run this script
from each checkout (``PYTHONPATH`` set to it) in alternating rounds and compare medians.
The database must be migrated. ``--poppy`` merges keys into ``settings.POPPY``; ``--ops``
picks the phases (``--ops turn``: only text POSTs, to profile them; a read's cursor counts
on both POST phases before it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")


def flush_spans() -> None:
    """Export the spans an operation made before its CPU is read, so each operation pays for
    its own (the OpenTelemetry SDK's batch processor otherwise exports them every 5 s, during
    whichever operation runs then). Nothing without an SDK."""
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if hasattr(provider, "force_flush"):
        provider.force_flush()


async def call(
    app: Any, auth: bytes, method: str, path: str, query: bytes = b"", body: bytes = b""
):
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 5000),
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-length", str(len(body)).encode()),
            (b"content-type", b"application/json"),
            (b"authorization", auth),
        ],
    }
    pending = [{"type": "http.request", "body": body, "more_body": False}]
    status: list[int] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status[0], b"".join(chunks)


async def measure(requests: int, ops: list[str]) -> dict[str, dict[str, float]]:
    from django.core.handlers.asgi import ASGIHandler

    from poppy_django.verifier.fake import fake_authorization

    app = ASGIHandler()
    auth = fake_authorization("https://pa.example/bench", f"cost-{os.getpid()}").encode()
    first = {"message": {"id": f"s-{os.getpid()}", "sender": "agent", "context": {"a": 1}}}
    status, body = await call(
        app, auth, "POST", "/poppy/conversations", body=json.dumps(first).encode()
    )
    assert status == 201, body
    conversation_id = json.loads(body)["conversation_id"]
    results = {}
    for op in ops:
        cpu, wall = time.process_time(), time.perf_counter()
        for n in range(requests):
            if op in ("post", "turn"):
                content = {"context": {"n": n}} if op == "post" else {"text": f"hello {n}"}
                message = {"message": {"id": f"{op}-{os.getpid()}-{n}", "sender": "agent"}}
                message["message"].update(content)
                path = f"/poppy/conversations/{conversation_id}/messages"
                status, body = await call(
                    app, auth, "POST", path, body=json.dumps(message).encode()
                )
                assert status == 202, body
            else:
                cursor = f"evt_{conversation_id[4:]}_{2 * requests - 2}"
                path = f"/poppy/conversations/{conversation_id}/events"
                status, body = await call(app, auth, "GET", path, query=f"cursor={cursor}".encode())
                assert status == 200, body
        flush_spans()
        results[op] = {
            "cpu_ms": (time.process_time() - cpu) / requests * 1000,
            "wall_ms": (time.perf_counter() - wall) / requests * 1000,
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--poppy", default="{}", help="JSON merged into settings.POPPY")
    parser.add_argument("--ops", default="post,turn,read", help="which to send, in this order")
    args = parser.parse_args()
    import django

    django.setup()
    from django.conf import settings

    from poppy_django.conf import poppy_settings

    settings.POPPY = {**settings.POPPY, **json.loads(args.poppy)}
    poppy_settings.reload()
    print(json.dumps(asyncio.run(measure(args.requests, args.ops.split(",")))))


if __name__ == "__main__":
    main()
