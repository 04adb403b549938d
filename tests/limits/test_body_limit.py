"""The body limit at the ASGI level: a body over 1 MiB on the endpoint is refused before
Django reads it (issue: an unauthenticated ``Content-Length: 1000000000`` was spooled to a
temporary file before any check ran).

Driven two ways: through a real uvicorn server on a raw socket (what a hostile client does),
and by calling the example project's ASGI application directly, counting what it consumed.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator

import pytest
from asgiref.sync import async_to_sync

from example_project.asgi import application
from tests.threaded_server import serve

LIMIT = 1024 * 1024
CHUNK = 64 * 1024


@pytest.fixture
def server() -> Iterator[tuple[str, int]]:
    """The example project's ASGI application (with its body limit) under uvicorn, in a thread."""
    with serve(application) as url:
        host, port = url.removeprefix("http://").split(":")
        yield host, int(port)


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes, bool]:
    """Status, headers, body, and whether the server then closed the connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a response: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    if "content-length" not in headers:  # chunked: read to the last chunk, then decode
        while not rest.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(65536)
            assert chunk
            rest += chunk
        body = b""
        while (size := int(rest.split(b"\r\n", 1)[0], 16)) > 0:
            rest = rest.split(b"\r\n", 1)[1]
            body, rest = body + rest[:size], rest[size + 2 :]
        return status, headers, body, False
    length = int(headers["content-length"])
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk
        rest += chunk
    try:
        closed = sock.recv(65536) == b""
    except ConnectionResetError:  # closed with the unread rest of the body still arriving
        closed = True
    return status, headers, rest[:length], closed


def request_head(path: str, *headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    return ("\r\n".join([*lines, *headers]) + "\r\n\r\n").encode()


def assert_too_large(status: int, headers: dict[str, str], body: bytes) -> None:
    assert status == 413
    assert headers["content-type"] == "application/json"
    assert headers["cache-control"] == "no-store"
    assert json.loads(body)["error"] == "request_too_large"


def test_a_declared_length_over_the_limit_is_refused_before_any_body_is_sent(server) -> None:
    # Not one byte of the body is sent: without the limit the server would wait for it.
    with socket.create_connection(server, timeout=10) as sock:
        sock.sendall(request_head("/poppy/conversations", "Content-Length: 1000000000"))
        status, headers, body, closed = read_response(sock)
    assert_too_large(status, headers, body)
    assert headers["connection"] == "close" and closed


def test_a_streamed_body_is_refused_at_the_limit_and_the_rest_never_read(server) -> None:
    # Chunked, no length: 1 MiB + 64 KiB sent and the body left unfinished. The answer
    # comes anyway, so the server did not wait to buffer the whole body.
    with socket.create_connection(server, timeout=10) as sock:
        sock.sendall(
            request_head("/poppy/conversations/cnv_x/messages", "Transfer-Encoding: chunked")
        )
        piece = b"x" * CHUNK
        for _ in range(LIMIT // CHUNK + 1):
            sock.sendall(f"{CHUNK:x}\r\n".encode() + piece + b"\r\n")
        status, headers, body, closed = read_response(sock)
    assert_too_large(status, headers, body)
    assert closed


def test_a_body_within_the_limit_reaches_the_endpoint(server) -> None:
    body = json.dumps({"message": {"id": "m1", "sender": "agent", "text": "x" * 1000}}).encode()
    with socket.create_connection(server, timeout=10) as sock:
        sock.sendall(request_head("/poppy/conversations", f"Content-Length: {len(body)}") + body)
        status, _, answer, _ = read_response(sock)
    # The fake verifier refuses the missing token: the request got past the limit to Django.
    assert status == 401
    assert json.loads(answer)["error"] == "invalid_token"


# The ASGI application driven directly -----------------------------------------------------


class Call:
    """One ASGI request: a body sent in chunks, what the application read and answered."""

    def __init__(self, path: str, *, length: int | None, chunks: int) -> None:
        headers = [(b"host", b"testserver"), (b"content-type", b"application/json")]
        if length is not None:
            headers.append((b"content-length", str(length).encode()))
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": headers,
            "client": ("127.0.0.1", 5000),
            "server": ("testserver", 80),
        }
        self.chunks = chunks
        self.consumed = 0
        self.sent: list[dict] = []

    async def receive(self) -> dict:
        if self.consumed >= self.chunks * CHUNK:
            await asyncio.Event().wait()  # the client waits for its answer
        self.consumed += CHUNK
        more = self.consumed < self.chunks * CHUNK
        return {"type": "http.request", "body": b"x" * CHUNK, "more_body": more}

    async def send(self, message: dict) -> None:
        self.sent.append(message)

    def run(self) -> Call:
        async_to_sync(application)(self.scope, self.receive, self.send)
        return self

    @property
    def status(self) -> int:
        return next(m["status"] for m in self.sent if m["type"] == "http.response.start")

    @property
    def body(self) -> dict:
        return json.loads(b"".join(m.get("body", b"") for m in self.sent[1:]))


def test_the_application_answers_a_declared_length_without_reading_the_body() -> None:
    call = Call("/poppy/conversations", length=10**9, chunks=100).run()
    assert call.status == 413 and call.body["error"] == "request_too_large"
    assert call.consumed == 0


def test_the_application_stops_reading_a_stream_at_the_limit() -> None:
    call = Call("/poppy/conversations/cnv_x/close", length=None, chunks=1000).run()
    assert call.status == 413 and call.body["error"] == "request_too_large"
    # What was read is the limit and the one chunk that crossed it, not the 64 MiB offered.
    assert call.consumed == LIMIT + CHUNK
    assert len([m for m in call.sent if m["type"] == "http.response.start"]) == 1


@pytest.mark.django_db
def test_other_paths_are_not_limited_here() -> None:
    # The admin login reads its whole (2 MiB) body; Django's own settings govern it.
    call = Call("/admin/login/", length=None, chunks=32).run()
    assert call.consumed == 32 * CHUNK
    assert call.status == 403  # its CSRF check, after the whole body was read


def test_the_limit_follows_the_setting(settings) -> None:
    settings.POPPY = {**settings.POPPY, "MAX_BODY_BYTES": 4 * CHUNK}
    call = Call("/poppy/conversations", length=None, chunks=100).run()
    assert call.status == 413
    assert call.consumed == 5 * CHUNK
    assert Call("/poppy/conversations", length=5 * CHUNK, chunks=100).run().consumed == 0
