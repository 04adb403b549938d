"""Waiting readers cost no threads: long-polls and streams held open on a real ASGI server."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import pytest

from tests.agents import PersonalAgent
from tests.multiprocess.cluster import Cluster
from tests.waiting import eventually

pytestmark = pytest.mark.multiprocess
READERS = 80


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("Threads:"))


async def _hold_readers(port: int, path: str, authorization: str, cursor: str) -> list:
    """Open READERS waiting reads, alternating long-polls and SSE streams.

    Each stream is read up to its first line before the next read opens, so every request
    before it has reached the server.
    """
    held = []
    for n in range(READERS):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        stream = n % 2 == 1
        query = "" if stream else f"?wait=30&cursor={cursor}"
        accept = "text/event-stream" if stream else "application/json"
        writer.write(
            f"GET {path}{query} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: {accept}\r\n"
            f"Authorization: {authorization}\r\n\r\n".encode()
        )
        await writer.drain()
        if stream:  # a stream answers at once with its opening comment
            assert b"200" in await reader.readline()
        held.append(writer)
    return held


def test_held_long_polls_and_streams_hold_no_threads(mp: Cluster):
    web = mp.web("web")
    pa = PersonalAgent()
    context_only = {"message": {"id": "ctx-1", "sender": "agent", "context": {"locale": "en"}}}
    conversation_id = pa.at(web).post("", context_only).json()["conversation_id"]
    cursor = pa.at(web).page(conversation_id)["cursor"]
    pid = mp.processes["web"].pid
    before = _threads(pid)

    async def measure() -> list[int]:
        held = await _hold_readers(
            urlsplit(web).port or 80,
            f"/poppy/conversations/{conversation_id}/events",
            pa.http_headers()["Authorization"],
            cursor,
        )
        # Each reader gives its request thread back once it starts waiting: the count
        # falls to a small executor pool (a thread kept per reader would add READERS).
        samples = [_threads(pid)]
        await asyncio.to_thread(
            eventually, lambda: samples.append(_threads(pid)) or samples[-1] - before < 12
        )
        for writer in held:
            writer.close()
        await asyncio.gather(*(writer.wait_closed() for writer in held), return_exceptions=True)
        return samples

    samples = asyncio.run(measure())
    assert samples[-1] - before < 12, (before, samples)
