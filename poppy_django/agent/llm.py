"""A Company Agent answered by a real LLM through pydantic-ai (the ``llm`` extra).

``PydanticAIModel("openai:gpt-4o")`` takes any pydantic-ai model name, ``"test"`` (its offline
TestModel) or a pydantic-ai ``Model`` instance, so the provider is a setting, not code.

Why two threads: the runtime runs a turn synchronously in a worker thread whose database
connection holds the turn's state, and ``call_tool`` / ``emit_text`` use the Django ORM there.
pydantic-ai is asyncio, runs plain ``def`` tools in a thread pool (another connection), and
Django refuses ORM calls from a thread with a running event loop. So the agent runs on a
fresh event loop in a helper thread, and every callback is handed back to the calling thread
and run there, one at a time, in the order the model produced it.

Text: every piece of text the model writes is emitted as it streams in, including text it
writes before a tool call ("Let me look that up."); the texts of successive model responses
are separated by a blank line. When the model writes text only after its last tool call (the
usual case), the pieces concatenate to exactly that text.

Ending early: when ``call_tool`` or ``emit_text`` raises (``TurnInterrupted`` above all), the
run is cancelled, nothing more reaches the callbacks, and ``run`` re-raises that exception
itself — it never depends on pydantic-ai passing it through.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterable
from concurrent.futures import Future
from dataclasses import dataclass
from itertools import groupby
from queue import SimpleQueue
from typing import Any

from pydantic import ValidationError
from pydantic_ai import Agent, CancellationToken, ModelRetry, RunContext
from pydantic_ai import Tool as PydanticTool
from pydantic_ai.messages import (
    AgentStreamEvent,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    SystemPromptPart,
    TextPart,
    TextPartDelta,
    UserPromptPart,
)
from pydantic_ai.models import Model, infer_model

from poppy_django.agent.model_api import CallTool, EmitText, ModelTurn
from poppy_django.agent.tools import Tool, describe_invalid_arguments

#: Between the texts of two model responses (e.g. before and after a tool call).
RESPONSE_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class _Text:
    piece: str


@dataclass(frozen=True)
class _Call:
    name: str
    arguments: dict[str, Any]
    result: Future[Any]


@dataclass(frozen=True)
class _Finished:
    error: BaseException | None


_Message = _Text | _Call | _Finished


class _TurnEnded(Exception):
    """Answers a tool call the model made after the calling thread ended the turn."""


class PydanticAIModel:
    """``POPPY["MODEL"] = "anthropic:claude-sonnet-4-0"``: a turn answered by an LLM."""

    def __init__(self, model_name: str | Model) -> None:
        # Resolved once now so a missing provider package or API key is reported when the model
        # is built, not as a failed turn.
        infer_model(model_name)
        self.model_name = model_name

    def run(self, turn: ModelTurn, call_tool: CallTool, emit_text: EmitText) -> None:
        inbox: SimpleQueue[_Message] = SimpleQueue()
        cancel = CancellationToken()
        worker = threading.Thread(
            target=self._drive, args=(turn, inbox, cancel), name="poppy-llm-turn", daemon=True
        )
        worker.start()
        failure: BaseException | None = None
        while not isinstance(message := inbox.get(), _Finished):
            if failure is not None:
                if isinstance(message, _Call):
                    message.result.set_exception(_TurnEnded())
                continue
            try:
                if isinstance(message, _Text):
                    emit_text(message.piece)
                else:
                    message.result.set_result(call_tool(message.name, message.arguments))
            except BaseException as error:
                failure = error
                if isinstance(message, _Call):
                    message.result.set_exception(_TurnEnded())
                cancel.cancel()
        worker.join()
        if failure is not None:
            raise failure
        if message.error is not None:
            raise _naming_the_model(message.error, self.model_name)

    def _drive(
        self, turn: ModelTurn, inbox: SimpleQueue[_Message], cancel: CancellationToken
    ) -> None:
        """The helper thread: run the agent on its own event loop, then say how it ended."""
        try:
            asyncio.run(self._answer(turn, inbox, cancel))
        except BaseException as error:
            inbox.put(_Finished(error))
        else:
            inbox.put(_Finished(None))

    async def _answer(
        self, turn: ModelTurn, inbox: SimpleQueue[_Message], cancel: CancellationToken
    ) -> None:
        agent = Agent(
            # A model per turn: a provider's HTTP client belongs to the event loop it was used
            # on, and this loop closes with the turn.
            infer_model(self.model_name),
            instructions=_instructions(turn),
            tools=[_pydantic_tool(tool, inbox) for tool in turn.tools],
        )
        async with agent:  # closes the provider's HTTP client with the turn
            await agent.run(
                _user_prompt(turn),
                message_history=_history(turn.history),
                event_stream_handler=_TextRelay(inbox),
                cancellation_token=cancel,
            )


def _naming_the_model(error: BaseException, model: str | Model) -> BaseException:
    """The model's name on a failure that lacks it (``UnexpectedModelBehavior``): the turn's
    log line then says which model failed (:func:`poppy_django.observe.describe_failure`)."""
    if getattr(error, "model_name", None) is None:
        name = model if isinstance(model, str) else model.model_name
        with contextlib.suppress(AttributeError):  # an exception type that takes no attributes
            error.model_name = name  # type: ignore[attr-defined]
    return error


def _instructions(turn: ModelTurn) -> str:
    if not turn.page_context:
        return turn.instructions
    return f"{turn.instructions}\n\nPage context (JSON): {json.dumps(turn.page_context)}"


def _user_prompt(turn: ModelTurn) -> str | None:
    """The new user messages as one prompt; None lets a history ending in a request stand."""
    rendered = [text for item in turn.inputs if (text := item.render())]
    return "\n\n".join(rendered) or None


def _history(entries: list[dict[str, str]]) -> list[ModelMessage]:
    """Thread entries as pydantic-ai messages; consecutive requests or replies share a message.

    Merging keeps user and assistant messages alternating, which some providers require.
    """
    messages: list[ModelMessage] = []
    for is_reply, group in groupby(entries, key=lambda entry: entry["role"] == "assistant"):
        if is_reply:
            messages.append(ModelResponse(parts=[TextPart(entry["text"]) for entry in group]))
        else:
            messages.append(ModelRequest(parts=[_request_part(entry) for entry in group]))
    return messages


def _request_part(entry: dict[str, str]) -> ModelRequestPart:
    if entry["role"] == "user":
        return UserPromptPart(entry["text"])
    if entry["role"] == "system":
        return SystemPromptPart(entry["text"])
    raise ValueError(f"A history entry's role is user, assistant or system, not {entry['role']!r}.")


def _pydantic_tool(tool: Tool, inbox: SimpleQueue[_Message]) -> PydanticTool[None]:
    """The tool as pydantic-ai sees it: its JSON schema, and a call run by the calling thread."""

    async def call(**arguments: Any) -> Any:
        try:
            validated = tool.validate(arguments)
        except ValidationError as error:
            raise ModelRetry(describe_invalid_arguments(tool.name, error)) from error
        result: Future[Any] = Future()
        inbox.put(_Call(tool.name, validated, result))
        return await asyncio.wrap_future(result)

    return PydanticTool.from_schema(
        call,
        name=tool.name,
        description=tool.description,
        json_schema=tool.json_schema(),
        # One call at a time, in the model's order, as the calling thread runs them anyway.
        sequential=True,
    )


class _TextRelay:
    """pydantic-ai's event stream handler: forwards text as it streams in, per response."""

    def __init__(self, inbox: SimpleQueue[_Message]) -> None:
        self.inbox = inbox
        self.wrote = False

    async def __call__(
        self, ctx: RunContext[None], events: AsyncIterable[AgentStreamEvent]
    ) -> None:
        # Called once per model response (and once per round of tool calls, which has no text).
        separate = self.wrote
        async for event in events:
            piece = _text_of(event)
            if not piece:
                continue
            if separate:
                piece, separate = RESPONSE_SEPARATOR + piece, False
            self.inbox.put(_Text(piece))
            self.wrote = True


def _text_of(event: AgentStreamEvent) -> str:
    if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
        return event.part.content
    if isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
        return event.delta.content_delta
    return ""
