"""An LLM-shaped local model: a small OpenAI-compatible chat-completions server (plain ASGI).

Turns answered through it run exactly the code a real LLM turn runs — pydantic-ai's OpenAI
chat model (``POPPY["MODEL"] = "openai-chat:<any name>"`` with ``OPENAI_BASE_URL`` pointing
here), the ``openai`` SDK's httpx streaming and retries, pydantic-ai's agent loop, tool calls
and text deltas — while the answer takes as long as a real model's: a time to first token,
then tokens at a rate. Everything waits on ``asyncio.sleep``, so one process holds thousands
of open streams; it counts them (``GET /stats``), which is how the tests and ``bench/`` see how
many model calls a deployment keeps in flight at once.

Served by ``bench/llm_endpoint.py`` (a process of its own) or :func:`serving` (a thread of the
test process). Routes:

- ``POST /v1/chat/completions``: ``stream: true`` answers SSE ``chat.completion.chunk``s (with
  a usage chunk when ``stream_options.include_usage``), else one ``chat.completion``.
- ``GET /stats``: ``{"open", "max_open", "requests", ...}`` as JSON; ``POST /stats/reset``.

What it answers, from the request's messages (rules in order):

1. The last message is a tool result: the final text — the result's ``summary`` when it is a
   JSON object with one, else ``"Result: <content>"`` — streamed like any text.
2. The last user message names, as a word, a tool the request offers: a call of that tool,
   its arguments from ``name=value`` pairs in the text (a tool with one required parameter
   also takes the word after its name: ``cancel_order A-1``).
3. Otherwise ``"You said: <text>"`` (markers removed), padded with filler words to the token
   count, one word a token.

Markers in the last user message override the server's settings for that request:
``#ttft=<seconds>``, ``#tokens=<count>``, ``#rate=<tokens per second>``; and fault modes:
``#429`` / ``#429=<K>`` (the first K requests carrying that user text get HTTP 429 with
``Retry-After``; default K = 1, which the SDK's retries absorb), ``#hang`` (the stream stops
after its first token and never ends), ``#error`` (an error event mid-stream, then the end),
``#drop`` (the connection is cut mid-stream).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from tests.threaded_server import running

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

COMPLETIONS_PATH = "/v1/chat/completions"
#: The words the reply is padded with up to its token count.
FILLER = ["and", "here", "is", "some", "more", "of", "the", "answer", "you", "asked", "for"]

_MARKER = re.compile(
    r"#(?P<name>ttft|tokens|rate|429|hang|error|drop)(?:=(?P<value>\d+(?:\.\d+)?))?"
)
_ARGUMENT = re.compile(r"""(?P<name>[A-Za-z_]\w*)=(?:"(?P<quoted>[^"]*)"|(?P<plain>[^\s,]+))""")
_ids = itertools.count(1)


@dataclass(frozen=True)
class Pace:
    """How long an answer takes: ``ttft`` seconds to the first token, then ``rate`` tokens/s."""

    ttft: float = 0.5
    tokens: int = 20
    rate: float = 20.0

    @property
    def interval(self) -> float:
        return 1.0 / self.rate if self.rate > 0 else 0.0


@dataclass(frozen=True)
class Plan:
    """What one request is answered with: text or a tool call, at a pace, or a fault."""

    pace: Pace
    text: str = ""
    tool_call: tuple[str, dict[str, Any]] | None = None
    fault: str | None = None  # "429", "hang", "error", "drop"
    rate_limit_times: int = 1


@dataclass
class Stats:
    """What the endpoint has served; ``open`` is the model calls in flight right now."""

    open: int = 0
    max_open: int = 0
    requests: int = 0
    completed: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    tool_calls: int = 0

    def opened(self) -> None:
        self.requests += 1
        self.open += 1
        self.max_open = max(self.max_open, self.open)

    def closed(self) -> None:
        self.open -= 1

    def reset(self) -> None:
        self.max_open, self.requests, self.completed, self.tool_calls = self.open, 0, 0, 0
        self.faults.clear()

    def to_json(self) -> dict[str, Any]:
        return {
            "open": self.open,
            "max_open": self.max_open,
            "requests": self.requests,
            "completed": self.completed,
            "tool_calls": self.tool_calls,
            "rate_limited": self.faults["429"],
            "hung": self.faults["hang"],
            "errored": self.faults["error"],
            "dropped": self.faults["drop"],
        }


class _Dropped(Exception):
    """Raised mid-response so the ASGI server cuts the connection (``#drop``)."""


class LlmEndpoint:
    """The ASGI application. ``pace``: the server's defaults; ``retry_after``: seconds a 429
    asks the client to wait."""

    def __init__(self, pace: Pace | None = None, *, retry_after: float = 1.0) -> None:
        self.pace = pace or Pace()
        self.retry_after = retry_after
        self.stats = Stats()
        self._rate_limited: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        if path == "/stats" and method == "GET":
            await _json(send, 200, self.stats.to_json())
        elif path == "/stats/reset" and method == "POST":
            self.stats.reset()
            await _json(send, 200, self.stats.to_json())
        elif path == COMPLETIONS_PATH and method == "POST":
            body = await _body(receive)
            self.stats.opened()
            try:
                await self._complete(body, receive, send)
            finally:
                self.stats.closed()
        else:
            await _json(send, 404, _error(f"no route {method} {path}", "not_found"))

    async def _complete(self, raw: bytes, receive: Receive, send: Send) -> None:
        try:
            request = json.loads(raw)
            plan = self.plan(request)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            await _json(send, 400, _error(f"bad request: {error}", "invalid_request_error"))
            return
        if plan.fault == "429":
            key = _last_user_text(request["messages"])
            self._rate_limited[key] += 1
            if self._rate_limited[key] <= plan.rate_limit_times:
                self.stats.faults["429"] += 1
                await self._too_many(send)
                return
            plan = replace(plan, fault=None)
        model = str(request.get("model", "local"))
        if plan.tool_call is not None:
            self.stats.tool_calls += 1
        if request.get("stream"):
            include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
            answer = self._stream(plan, model, send, include_usage)
        else:
            answer = self._whole(plan, model, send)
        await _until_disconnected(answer, receive)

    def plan(self, request: dict[str, Any]) -> Plan:
        """What ``request`` is answered with (the module docstring's rules)."""
        messages: list[dict[str, Any]] = request["messages"]
        user_text = _last_user_text(messages)
        pace, fault, times = self._markers(user_text)
        if messages and messages[-1].get("role") == "tool":
            return Plan(pace, _after_tool(_content(messages[-1])), None, fault, times)
        offered = [tool["function"] for tool in request.get("tools") or [] if tool.get("function")]
        for function in offered:
            arguments = _named_call(function, user_text)
            if arguments is not None:
                return Plan(pace, "", (function["name"], arguments), fault, times)
        text = _padded(f"You said: {_MARKER.sub('', user_text).strip()}", pace.tokens)
        return Plan(pace, text, None, fault, times)

    def _markers(self, text: str) -> tuple[Pace, str | None, int]:
        pace, fault, times = self.pace, None, 1
        for found in _MARKER.finditer(text):
            name, value = found["name"], found["value"]
            if name in ("ttft", "rate") and value:
                pace = replace(pace, **{name: float(value)})
            elif name == "tokens" and value:
                pace = replace(pace, tokens=int(float(value)))
            elif name in ("429", "hang", "error", "drop"):
                fault = name
                if name == "429" and value:
                    times = int(float(value))
        return pace, fault, times

    async def _too_many(self, send: Send) -> None:
        await _json(
            send,
            429,
            _error("Rate limit reached (local endpoint #429).", "rate_limit_exceeded"),
            headers=[
                (b"retry-after", f"{self.retry_after:g}".encode()),
                (b"retry-after-ms", f"{int(self.retry_after * 1000)}".encode()),
            ],
        )

    async def _stream(self, plan: Plan, model: str, send: Send, include_usage: bool) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-cache"),
                ],
            }
        )
        chunk = _Chunks(model)
        await asyncio.sleep(plan.pace.ttft)
        await _event(send, chunk.delta({"role": "assistant", "content": ""}))
        produced = 0
        async for delta in _deltas(plan):
            if produced == 1 and plan.fault in ("hang", "error", "drop"):
                await self._fault_mid_stream(plan.fault, send)
                return
            await _event(send, chunk.delta(delta))
            produced += 1
        finish = "tool_calls" if plan.tool_call else "stop"
        await _event(send, chunk.delta({}, finish_reason=finish))
        if include_usage:
            await _event(send, chunk.usage(produced))
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
        self.stats.completed += 1

    async def _fault_mid_stream(self, fault: str, send: Send) -> None:
        self.stats.faults[fault] += 1
        if fault == "hang":
            await asyncio.Event().wait()  # until the client goes away
        elif fault == "error":
            failure = _error("The local model failed mid-stream (#error).", "server_error")
            await _event(send, failure)
            await send({"type": "http.response.body", "body": b""})
        else:
            raise _Dropped("the connection is cut mid-stream (#drop)")

    async def _whole(self, plan: Plan, model: str, send: Send) -> None:
        if plan.fault == "hang":
            self.stats.faults["hang"] += 1
            await asyncio.Event().wait()
        pace = plan.pace
        await asyncio.sleep(pace.ttft + pace.interval * max(0, _token_count(plan) - 1))
        if plan.fault in ("error", "drop"):
            self.stats.faults[plan.fault] += 1
            await _json(send, 500, _error("The local model failed (#error).", "server_error"))
            return
        message: dict[str, Any] = {"role": "assistant", "content": plan.text or None}
        if plan.tool_call is not None:
            name, arguments = plan.tool_call
            message["tool_calls"] = [
                {
                    "id": f"call_{next(_ids)}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            ]
        finish = "tool_calls" if plan.tool_call else "stop"
        completion = {
            "id": f"chatcmpl-{next(_ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": _usage(_token_count(plan)),
        }
        await _json(send, 200, completion)
        self.stats.completed += 1


async def _deltas(plan: Plan) -> AsyncIterator[dict[str, Any]]:
    """The response's deltas, a token each, ``plan.pace.interval`` apart."""
    first = True
    if plan.tool_call is not None:
        name, arguments = plan.tool_call
        call_id = f"call_{next(_ids)}"
        opening = {"index": 0, "id": call_id, "type": "function"}
        yield {"tool_calls": [{**opening, "function": {"name": name, "arguments": ""}}]}
        for piece in _pieces(json.dumps(arguments)):
            await asyncio.sleep(plan.pace.interval)
            yield {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
        return
    for word in re.findall(r"\S+\s*", plan.text):
        if not first:
            await asyncio.sleep(plan.pace.interval)
        first = False
        yield {"content": word}


def _pieces(text: str, size: int = 8) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def _token_count(plan: Plan) -> int:
    if plan.tool_call is not None:
        return 1 + len(_pieces(json.dumps(plan.tool_call[1])))
    return len(plan.text.split())


class _Chunks:
    """``chat.completion.chunk`` objects of one response (one id, one creation time)."""

    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{next(_ids)}"
        self.created = int(time.time())
        self.model = model

    def _base(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
        }

    def delta(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return {**self._base(), "choices": [choice]}

    def usage(self, completion_tokens: int) -> dict[str, Any]:
        return {**self._base(), "choices": [], "usage": _usage(completion_tokens)}


def _usage(completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": 10,
        "completion_tokens": completion_tokens,
        "total_tokens": 10 + completion_tokens,
    }


def _content(message: dict[str, Any]) -> str:
    """A message's text: a string, or the text parts of a list of parts."""
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    return next((_content(m) for m in reversed(messages) if m.get("role") == "user"), "")


def _after_tool(result: str) -> str:
    """The final answer after a tool call: the result's summary when it has one."""
    with contextlib.suppress(ValueError):
        parsed = json.loads(result)
        if isinstance(parsed, dict) and isinstance(parsed.get("summary"), str):
            return str(parsed["summary"])
    return f"Result: {result}"


def _padded(text: str, tokens: int) -> str:
    words = text.split()
    filler = itertools.cycle(FILLER)
    while len(words) < tokens:
        words.append(next(filler))
    return " ".join(words)


def _named_call(function: dict[str, Any], text: str) -> dict[str, Any] | None:
    """Arguments for ``function`` when ``text`` names it as a word, else None."""
    name = function.get("name", "")
    named = re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE)
    if not name or named is None:
        return None
    schema = function.get("parameters") or {}
    properties: dict[str, Any] = schema.get("properties") or {}
    arguments: dict[str, Any] = {}
    for found in _ARGUMENT.finditer(text):
        if found["name"] in properties:
            value = found["quoted"] if found["quoted"] is not None else found["plain"]
            arguments[found["name"]] = _typed(value, properties[found["name"]])
    required = schema.get("required") or []
    if len(required) == 1 and required[0] not in arguments:
        following = re.match(r"\s+([^\s,?.!]+)", text[named.end() :])
        if following and "=" not in following[1]:
            arguments[required[0]] = _typed(following[1], properties.get(required[0], {}))
    return arguments


def _typed(value: str, schema: dict[str, Any]) -> Any:
    if schema.get("type") in ("integer", "number", "boolean"):
        with contextlib.suppress(ValueError):
            return json.loads(value)
    return value


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


async def _until_disconnected(answer: Awaitable[None], receive: Receive) -> None:
    """Run ``answer``; cancel it when the client goes away (a turn abandoned, a hang ended)."""
    answering = asyncio.ensure_future(answer)

    async def disconnected() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    watching = asyncio.ensure_future(disconnected())
    try:
        await asyncio.wait({answering, watching}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (answering, watching):
            task.cancel()
        await asyncio.gather(answering, watching, return_exceptions=True)
    if answering.done() and not answering.cancelled() and answering.exception() is not None:
        raise answering.exception()  # type: ignore[misc]


async def _body(receive: Receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def _event(send: Send, data: dict[str, Any]) -> None:
    await send(
        {
            "type": "http.response.body",
            "body": b"data: " + json.dumps(data).encode() + b"\n\n",
            "more_body": True,
        }
    )


async def _json(
    send: Send, status: int, data: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(data).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


# --- serving it -----------------------------------------------------------------------------


def uvicorn_server(app: LlmEndpoint) -> Any:
    import uvicorn

    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_keep_alive=60,
        # Hung streams (#hang) never end by themselves: shutting down cuts them.
        timeout_graceful_shutdown=1,
    )
    return uvicorn.Server(config)


@dataclass
class Serving:
    """A running endpoint: ``base_url`` is what ``OPENAI_BASE_URL`` names (``.../v1``)."""

    app: LlmEndpoint
    url: str

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"


@contextlib.contextmanager
def serving(pace: Pace | None = None, *, retry_after: float = 1.0) -> Iterator[Serving]:
    """The endpoint on a free port, served by uvicorn in a thread of this process."""
    app = LlmEndpoint(pace, retry_after=retry_after)
    with running(uvicorn_server(app), name="llm-endpoint") as url:
        yield Serving(app, url)
