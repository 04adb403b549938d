"""An ASGI application under a real uvicorn server in a thread, for tests that need real
sockets in this process (its database and settings): SSE, raw HTTP, fuzzing."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any


def serve(application: Any, log_level: str = "warning") -> Iterator[str]:
    """``application`` under uvicorn in a thread; yields its base URL, then stops it."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        application, host="127.0.0.1", port=port, log_level=log_level, lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:  # readiness, not a timing assumption
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)
