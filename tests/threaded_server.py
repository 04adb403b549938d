"""The suite's one way to run an ASGI application under a real uvicorn server in a thread of
this process, for tests that need real sockets with this process's database and settings:
SSE, raw HTTP, fuzzing, the agents' sites, the LLM-shaped model, a browser's TLS site.

(The example project as shipped, in processes of its own, is tests/multiprocess/cluster.py.)
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.waiting import eventually


def listening_socket(port: int = 0, host: str = "127.0.0.1") -> socket.socket:
    """A listening socket (port 0: a free one the OS picks), handed to uvicorn as is; its
    backlog holds the thousands of connections a capacity run opens at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(8192)
    return sock


@contextlib.contextmanager
def running(
    server: Any, sock: socket.socket | None = None, *, name: str = "uvicorn"
) -> Iterator[str]:
    """A built ``uvicorn.Server`` run in a thread on ``sock`` (a free port by default): its
    base URL once it listens (``https`` when its config has a certificate), then stopped."""
    sock = sock or listening_socket()
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=name, daemon=True)
    thread.start()

    def started() -> bool:
        assert thread.is_alive() or server.started, f"{name} stopped before it listened"
        return bool(server.started)

    try:
        eventually(started, what=f"{name} to listen")
        scheme = "https" if server.config.ssl_certfile else "http"
        host, port = sock.getsockname()[:2]
        yield f"{scheme}://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()


@contextlib.contextmanager
def serve(
    application: Any,
    *,
    log_level: str = "warning",
    tls: tuple[Path, Path] | None = None,
    name: str = "uvicorn",
    **config: Any,
) -> Iterator[str]:
    """``application`` under uvicorn in a thread (no lifespan, TLS with ``tls`` = certificate
    and key files, other ``uvicorn.Config`` options as given); yields its base URL."""
    import uvicorn

    if tls is not None:
        config.update(ssl_certfile=str(tls[0]), ssl_keyfile=str(tls[1]))
    server = uvicorn.Server(
        uvicorn.Config(application, log_level=log_level, lifespan="off", **config)
    )
    with running(server, name=name) as url:
        yield url
