"""Every channel's limits hold against the example project as shipped (issue 43).

Acme runs as :mod:`tests.authority.shipped` starts it (production mode: uvicorn over TLS, a
Celery worker, PostgreSQL, Redis; no setting overridden). Hostile clients speak raw HTTP/1.1
over TLS where an HTTP library would not let them misbehave (a body declared larger than it
is sent, a body that never finishes).
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from personal_agent_protocol.demo.kit import AgentIdentity

from tests.authority.shipped import DOMAIN, ShippedAcme, shipped_acme

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]
ATLAS = AgentIdentity(domain="atlas.example", name="Atlas")
#: Every channel route that takes a body (one of each kind), and what it is sent as.
CHANNEL_ROUTES = [
    ("/poppy/conversations", "application/json"),
    ("/poppy/mcp", "application/json"),
    ("/poppy/operations/op_00000000000000000000000000/confirm", "application/json"),
    ("/poppy/feedback", "application/json"),
    ("/poppy/sign-in", "application/json"),
    ("/poppy/sign-in/msi_0000000000000000000000", "application/json"),
    ("/poppy/browser-session", "application/x-www-form-urlencoded"),
    ("/oauth/token", "application/x-www-form-urlencoded"),
]
#: Shipped: POPPY["BODY_READ_SECONDS"]'s default. The bound below is a deadline, not a speed.
READ_SECONDS = 20


@pytest.fixture(scope="module")
def acme(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShippedAcme]:
    with shipped_acme(Path(tmp_path_factory.mktemp("acme")), [ATLAS]) as running:
        yield running


async def raw_request(
    acme: ShippedAcme, head: str, body: bytes, *, wait: float
) -> tuple[int, bytes, float]:
    """Send ``head`` and ``body`` over TLS and keep the connection open; the answer's status,
    its bytes, and how long it took to come (``wait``: the most seconds waited for it)."""
    context: ssl.SSLContext = acme.authority.context()
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", acme.port, ssl=context, server_hostname=DOMAIN
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        writer.write(head.encode() + body)
        await writer.drain()
        answer = b""
        while not _whole(answer):
            more = await asyncio.wait_for(reader.read(65536), wait)
            if not more:
                break
            answer += more
    finally:
        writer.close()
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0
    return status, answer, loop.time() - started


def _whole(answer: bytes) -> bool:
    """The answer's head and as much body as its ``content-length`` says are in."""
    head_part, separator, body = answer.partition(b"\r\n\r\n")
    if not separator:
        return False
    found = re.search(rb"(?im)^content-length: *(\d+)", head_part)
    return found is None or len(body) >= int(found.group(1))


def head(path: str, content_type: str, *headers: str) -> str:
    lines = [f"POST {path} HTTP/1.1", f"Host: {DOMAIN}", f"Content-Type: {content_type}"]
    return "\r\n".join([*lines, *headers]) + "\r\n\r\n"


def test_a_body_declared_over_the_limit_is_refused_before_it_is_sent(acme: ShippedAcme) -> None:
    async def scenario() -> list[tuple[int, bytes, float]]:
        return list(
            await asyncio.gather(
                *(
                    raw_request(
                        acme,
                        head(path, kind, "Content-Length: 419430400"),
                        b"{" * 1024,
                        wait=10,
                    )
                    for path, kind in CHANNEL_ROUTES
                )
            )
        )

    for (path, _), (status, answer, _) in zip(CHANNEL_ROUTES, asyncio.run(scenario()), strict=True):
        assert status == 413, (path, answer[:300])
        assert b'"request_too_large"' in answer


def test_a_chunked_body_is_cut_at_the_routes_limit(acme: ShippedAcme) -> None:
    chunk = b"x" * 65536
    stream = (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * 40  # 2.5 MiB, past every limit

    async def scenario() -> list[tuple[int, bytes, float]]:
        return list(
            await asyncio.gather(
                *(
                    raw_request(
                        acme, head(path, kind, "Transfer-Encoding: chunked"), stream, wait=30
                    )
                    for path, kind in CHANNEL_ROUTES
                )
            )
        )

    for (path, _), (status, answer, _) in zip(CHANNEL_ROUTES, asyncio.run(scenario()), strict=True):
        assert status == 413, (path, answer[:300])


def test_a_body_that_never_finishes_is_not_waited_on(acme: ShippedAcme) -> None:
    async def scenario() -> list[tuple[int, bytes, float]]:
        return list(
            await asyncio.gather(
                *(
                    raw_request(
                        acme,
                        head(path, kind, "Content-Length: 100"),
                        b'{"a": 1',
                        wait=READ_SECONDS + 30,
                    )
                    for path, kind in CHANNEL_ROUTES
                )
            )
        )

    for (path, _), (status, answer, _) in zip(CHANNEL_ROUTES, asyncio.run(scenario()), strict=True):
        assert status == 408, (path, answer[:300])
        assert b"request_timeout" in answer
