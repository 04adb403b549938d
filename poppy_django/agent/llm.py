"""A Company Agent answered by a real LLM through pydantic-ai (the ``llm`` extra).

``PydanticAIModel("openai:gpt-4o")`` takes any pydantic-ai model name, ``"test"`` (its offline
TestModel) or a pydantic-ai ``Model`` instance, so the provider is a setting, not code.

The model runs on the engine's event loop (:mod:`poppy_django.engine.loop`), with every other turn
of the process: pydantic-ai's agent is awaited there, streaming over the provider's httpx
client, which the process's turns share (one connection pool per process and model). Tools
are awaited in the model's order, one at a time; ``call_tool`` runs them where they belong
(``async def`` tools on the loop, blocking ones on the engine's database threads).

Text: every piece of text the model writes is emitted as it streams in, including text it
writes before a tool call ("Let me look that up."); the texts of successive model responses
are separated by a blank line. When the model writes text only after its last tool call (the
usual case), the pieces concatenate to exactly that text.

Ending early: when ``call_tool`` or ``emit_text`` raises (``TurnInterrupted`` above all), the
run is cancelled, nothing more reaches the callbacks, and ``run`` re-raises that exception
itself — it never depends on pydantic-ai passing it through. A turn's time limit cancels the
task awaiting ``run``, which cancels the model's request (its stream is closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import functools
import json
import weakref
from collections.abc import AsyncIterable
from itertools import groupby
from typing import Any, get_args

from pydantic import ValidationError
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai import Tool as PydanticTool
from pydantic_ai.exceptions import UserError
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
from pydantic_ai.models import KnownModelName, Model, infer_model
from pydantic_ai.models.fallback import FallbackModel

from poppy_django.agent.model_api import AsyncCallTool, EmitText, ModelTurn
from poppy_django.agent.tools import Tool, describe_invalid_arguments
from poppy_django.observe.model_calls import measured

#: Between the texts of two model responses (e.g. before and after a tool call).
RESPONSE_SEPARATOR = "\n\n"


class _Ended:
    """What ended a run early: the exception a callback raised (re-raised by ``run``)."""

    def __init__(self) -> None:
        self.failure: BaseException | None = None
        self.run: asyncio.Task[Any] | None = None

    def end(self, failure: BaseException) -> None:
        if self.failure is None:
            self.failure = failure
            if self.run is not None:
                self.run.cancel()


class _TurnEnded(Exception):
    """Answers a tool call the model made after the turn was ended."""


class PydanticAIModel:
    """``POPPY["MODEL"] = "anthropic:claude-sonnet-4-0"``: a turn answered by an LLM (a
    tuple of names: a fallback chain, pydantic-ai's ``FallbackModel``)."""

    def __init__(self, model_name: str | tuple[str, ...] | Model) -> None:
        # Resolved now so a missing provider package or API key is reported when the model
        # is built, not as a failed turn.
        names = model_name if isinstance(model_name, tuple) else (model_name,)
        for name in names:
            if isinstance(name, str):
                _resolvable(name)
        self.model_name = model_name

    async def run(self, turn: ModelTurn, call_tool: AsyncCallTool, emit_text: EmitText) -> None:
        ended = _Ended()
        agent = Agent(
            _shared_model(self.model_name, asyncio.get_running_loop()),
            instructions=_instructions(turn),
            tools=[_pydantic_tool(tool, call_tool, ended) for tool in turn.tools],
        )
        ended.run = asyncio.ensure_future(
            agent.run(
                _user_prompt(turn),
                message_history=_history(turn.history),
                event_stream_handler=_TextRelay(emit_text, ended),
            )
        )
        try:
            await ended.run
        except BaseException as error:
            if ended.failure is None:
                if isinstance(error, Exception):
                    _naming_the_model(error, self.model_name)
                raise  # the model's own error, or cancelled from outside (the time limit)
        finally:
            if not ended.run.done():
                ended.run.cancel()
        if ended.failure is not None:
            raise ended.failure


#: Per event loop, the models (and their providers' HTTP clients) its turns share: a client
#: belongs to the loop it was used on, and one per process keeps connections to the provider.
_shared: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[str | tuple[str, ...], Model]
] = weakref.WeakKeyDictionary()


@functools.cache
def _resolvable(name: str) -> None:
    """Resolve a model name once per process (a failure is not remembered: it raises again).

    Resolving builds a provider with its HTTP client and TLS context (the CA bundle read
    and parsed, tens of ms of CPU); a turn builds its model on the engine's loop, so doing
    it every turn stalled every other turn of the process.
    """
    try:
        infer_model(name)
    except UserError as error:
        if not str(error).startswith("Unknown model"):
            raise
        raise UserError(unknown_model(name)) from None


def unknown_model(name: str) -> str:
    """Why a name is no model, with the name likely meant: the provider's name corrected
    (``opneai:gpt-4o`` is ``openai:gpt-4o``), or, without one, a known model's provider.

    pydantic-ai's own suggestion compares whole names, so a typo in the provider can
    suggest another provider's model altogether.
    """
    known = get_args(getattr(KnownModelName, "__value__", KnownModelName))
    provider, colon, model = name.partition(":")
    if colon:
        providers = sorted({known_name.partition(":")[0] for known_name in known})
        close = difflib.get_close_matches(provider, providers, n=1)
        suggestion = f"{close[0]}:{model}" if close else None
    else:
        model = provider
        suggestion = next((found for found in known if found.partition(":")[2] == model), None)
    said = f"Unknown model: {name} (a pydantic-ai model is named 'provider:model')"
    if suggestion is not None:
        return f"{said}. Did you mean {suggestion!r}?"
    if colon:
        return f"{said}. {provider!r} is no provider pydantic-ai knows."
    return f"{said}. Name its provider first: 'provider:{model}'."


def _shared_model(name: str | tuple[str, ...] | Model, loop: asyncio.AbstractEventLoop) -> Model:
    if isinstance(name, Model):
        return measured(name)
    models = _shared.setdefault(loop, {})
    if name not in models:
        if isinstance(name, tuple):  # each model of the chain shared too
            models[name] = FallbackModel(*(_shared_model(one, loop) for one in name))
        else:
            models[name] = measured(infer_model(name))
    return models[name]


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


def _pydantic_tool(tool: Tool, call_tool: AsyncCallTool, ended: _Ended) -> PydanticTool[None]:
    """The tool as pydantic-ai sees it: its JSON schema, and a call through ``call_tool``."""

    async def call(**arguments: Any) -> Any:
        if ended.failure is not None:
            raise _TurnEnded()
        try:
            validated = tool.validate(arguments)
        except ValidationError as error:
            raise ModelRetry(describe_invalid_arguments(tool.name, error)) from error
        try:
            return await call_tool(tool.name, validated)
        except Exception as error:
            ended.end(error)
            raise _TurnEnded() from error

    return PydanticTool.from_schema(
        call,
        name=tool.name,
        description=tool.description,
        json_schema=tool.json_schema(),
        # One call at a time, in the model's order: an action's record depends on it.
        sequential=True,
    )


def _naming_the_model(error: BaseException, model: str | tuple[str, ...] | Model) -> BaseException:
    """The model's name on a failure that lacks it (``UnexpectedModelBehavior``): the turn's
    log line then says which model failed (:func:`poppy_django.observe.describe_failure`)."""
    if getattr(error, "model_name", None) is None:
        name = (
            model
            if isinstance(model, str)
            else " or ".join(model)
            if isinstance(model, tuple)
            else model.model_name
        )
        with contextlib.suppress(AttributeError):  # an exception type that takes no attributes
            error.model_name = name  # type: ignore[attr-defined]
    return error


class _TextRelay:
    """pydantic-ai's event stream handler: forwards text as it streams in, per response."""

    def __init__(self, emit_text: EmitText, ended: _Ended) -> None:
        self.emit_text = emit_text
        self.ended = ended
        self.wrote = False

    async def __call__(
        self, ctx: RunContext[None], events: AsyncIterable[AgentStreamEvent]
    ) -> None:
        # Called once per model response (and once per round of tool calls, which has no text).
        separate = self.wrote
        async for event in events:
            piece = _text_of(event)
            if not piece or self.ended.failure is not None:
                continue
            if separate:
                piece, separate = RESPONSE_SEPARATOR + piece, False
            try:
                self.emit_text(piece)
            except Exception as error:
                self.ended.end(error)
                return
            self.wrote = True


def _text_of(event: AgentStreamEvent) -> str:
    if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
        return event.part.content
    if isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
        return event.delta.content_delta
    return ""
