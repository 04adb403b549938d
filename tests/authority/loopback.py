"""A hostile personal agent's website on 127.0.0.1, reached the way a deployment routes.

A real TCP listener (port 0) answers the authority's fetches with bytes a test chose: a
status line or headers dripped one byte a second, a gzip bomb, JSON nested 50,000 deep.
``POPPY_AUTHORITY["FETCH_TRANSPORT"] = "tests.authority.loopback.transport"`` routes every
fetch to it (as an egress proxy or a split-horizon network would: the authority's own
checks run first, on the URL and on ``["RESOLVER"] = "tests.authority.loopback.resolve"``'s
public answer), so what is tested is the fetch code of production against a real socket.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx

PUBLIC_ADDRESS = "93.184.216.34"


@dataclass
class Answer:
    """What the listener sends for one path: ``raw`` bytes, the first ``drip_from`` at once
    and the rest one byte a second (None: all at once)."""

    raw: bytes
    drip_from: int | None = None


def json_answer(body: bytes, **headers: str) -> Answer:
    lines = [
        "HTTP/1.1 200 OK",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        "Connection: close",
        *(f"{name.replace('_', '-')}: {value}" for name, value in headers.items()),
    ]
    return Answer(("\r\n".join(lines) + "\r\n\r\n").encode() + body)


@dataclass
class Listener:
    """The listener, the answers it gives per path, and the requests it was sent."""

    answers: dict[str, Answer] = field(default_factory=dict)
    requests: list[bytes] = field(default_factory=list)
    dripping: threading.Event = field(default_factory=threading.Event)
    stopped: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            worker = threading.Thread(target=self._answer, args=(connection,), daemon=True)
            self._threads.append(worker)
            worker.start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = connection.recv(65536)
                if not chunk:
                    return
                request += chunk
            self.requests.append(request)
            path = request.split(b" ", 2)[1].decode()
            answer = self.answers.get(path.split("?", 1)[0], Answer(b"HTTP/1.1 404 No\r\n\r\n"))
            try:
                if answer.drip_from is None:
                    connection.sendall(answer.raw)
                    return
                connection.sendall(answer.raw[: answer.drip_from])
                self.dripping.set()
                for byte in answer.raw[answer.drip_from :]:
                    if self.stopped.wait(1.0):
                        return
                    connection.sendall(bytes([byte]))
            except OSError:
                return  # the authority hung up: what a dripping server should see

    def stop(self) -> None:
        self.stopped.set()
        # A close alone does not wake the thread blocked in accept() (it then held every
        # test's teardown for its 5 s join): shutting the listening socket down does.
        with contextlib.suppress(OSError):
            self.socket.shutdown(socket.SHUT_RDWR)
        self.socket.close()
        for thread in self._threads:
            thread.join(timeout=5)


#: The listener of the running test (one at a time: tests of one process run in turn).
current: Listener | None = None


def started() -> Iterator[Listener]:
    """Start the listener for a test (a fixture's body), and stop it after."""
    global current
    current = Listener()
    try:
        yield current
    finally:
        current.stop()
        current = None


class _ToLoopback(httpx.BaseTransport):
    """Every request sent to the listener over plain HTTP, its Host header kept."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert current is not None, "no loopback listener is running"
        routed = httpx.Request(
            request.method,
            request.url.copy_with(scheme="http", host="127.0.0.1", port=current.port),
            headers=request.headers,
            stream=request.stream,
            extensions=request.extensions,
        )
        return self._inner.handle_request(routed)

    def close(self) -> None:
        self._inner.close()


def transport() -> httpx.BaseTransport:
    return _ToLoopback()


def resolve(host: str) -> list[str]:
    return [PUBLIC_ADDRESS]
