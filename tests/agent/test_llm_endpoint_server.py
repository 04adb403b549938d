"""The LLM-shaped local model itself (tests/llm_endpoint.py): its capacity and its count."""

from __future__ import annotations

import asyncio
import json
import resource
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.llm_endpoint import Serving, serving
from tests.waiting import eventually


@pytest.fixture
def endpoint() -> Iterator[Serving]:
    with serving() as running:
        yield running


def stats(endpoint: Serving) -> dict[str, Any]:
    return httpx.get(f"{endpoint.url}/stats").json()


def test_the_endpoint_holds_hundreds_of_open_streams_and_counts_them(
    endpoint: Serving,
) -> None:
    """Each stream is a coroutine: hundreds stay open at once; a client gone is a stream
    closed."""
    streams = 400
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * streams + 256)), hard))
    port = int(endpoint.url.rpartition(":")[2])
    body = json.dumps(
        {"model": "local", "stream": True, "messages": [{"role": "user", "content": "hi #hang"}]}
    ).encode()
    request = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body

    async def hold() -> tuple[dict[str, Any], dict[str, Any]]:
        async def open_one() -> asyncio.StreamWriter:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
            return writer

        writers = await asyncio.gather(*(open_one() for _ in range(streams)))
        held = await asyncio.to_thread(stats, endpoint)
        for writer in writers:
            writer.close()
        closed: list[dict[str, Any]] = []

        def all_closed() -> bool:
            closed[:] = [stats(endpoint)]
            return not closed[0]["open"]

        await asyncio.to_thread(eventually, all_closed, timeout=30, what="every stream closed")
        return held, closed[0]

    held, after = asyncio.run(hold())
    assert (held["open"], held["max_open"]) == (streams, streams)
    assert (after["open"], after["max_open"]) == (0, streams)


def completion(endpoint: Serving, text: str, **body: Any) -> httpx.Response:
    return httpx.post(
        f"{endpoint.base_url}/chat/completions",
        json={"model": "local", "messages": [{"role": "user", "content": text}], **body},
        timeout=10,
    )


def test_a_whole_answer_and_a_tool_call_without_streaming(endpoint: Serving) -> None:
    answer = completion(endpoint, "hi #ttft=0 #tokens=4").json()
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"]["content"] == "You said: hi and"
    tools = [
        {
            "type": "function",
            "function": {
                "name": "cancel_order",
                "parameters": {
                    "type": "object",
                    "properties": {"order_id": {"type": "string"}},
                    "required": ["order_id"],
                },
            },
        }
    ]
    called = completion(endpoint, "cancel_order A-2 #ttft=0", tools=tools).json()
    (call,) = called["choices"][0]["message"]["tool_calls"]
    assert called["choices"][0]["finish_reason"] == "tool_calls"
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == (
        "cancel_order",
        {"order_id": "A-2"},
    )


def test_a_rate_limit_for_the_first_k_requests_with_retry_after(endpoint: Serving) -> None:
    refused = [completion(endpoint, "again #429=2 #ttft=0") for _ in range(3)]
    assert [response.status_code for response in refused] == [429, 429, 200]
    assert refused[0].headers["retry-after"] == "1"
    assert refused[0].json()["error"]["type"] == "rate_limit_exceeded"
    assert stats(endpoint)["rate_limited"] == 2


def test_bad_json_is_a_400(endpoint: Serving) -> None:
    response = httpx.post(f"{endpoint.base_url}/chat/completions", content=b"{", timeout=10)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
