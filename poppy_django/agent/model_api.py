"""The contract between a turn and the model that answers it.

A model receives the turn (history, new inputs, offered tools, page context), calls tools
through ``call_tool`` and writes its reply through ``emit_text`` piece by piece, as it is
produced. Raising from ``run`` fails the turn; ``call_tool`` may raise
:class:`TurnInterrupted` (a refused call), which the model must let propagate.

A model's ``run`` is ``async def`` (:class:`AsyncTurnModel`, what the scripted and the
pydantic-ai models are): it runs on the engine's event loop with many other turns, awaits
``call_tool`` and must never block. A plain ``def run`` (:class:`TurnModel`, a project's own
model) still works: it runs on a thread of asyncio's default executor (a few per process),
holding it for the whole turn, its ``call_tool`` and ``emit_text`` handed back to the loop.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from poppy_django.agent.tools import Tool


@dataclass(frozen=True)
class TurnInput:
    """One user message the turn answers."""

    text: str | None
    data: dict[str, Any] | None
    sender: str

    def render(self) -> str:
        """What a language model reads: the text, and ``data`` as JSON."""
        parts = [self.text] if self.text else []
        if self.data is not None:
            parts.append(f"(data: {json.dumps(self.data)})")
        return " ".join(parts)


@dataclass(frozen=True)
class ModelTurn:
    instructions: str
    #: The thread's newest earlier entries (at most ``THREAD_HISTORY_ENTRIES``), oldest first:
    #: ``{"role": "user"|"assistant"|"system", "text": ...}``.
    history: list[dict[str, str]]
    inputs: list[TurnInput]
    tools: list[Tool]
    page_context: dict[str, Any] = field(default_factory=dict)


class TurnInterrupted(Exception):
    """A refused tool call ends the turn (the runtime records why)."""


CallTool = Callable[[str, dict[str, Any]], Any]
AsyncCallTool = Callable[[str, dict[str, Any]], Awaitable[Any]]
EmitText = Callable[[str], None]
#: Runs blocking work off the event loop and awaits its result (the engine's database threads).
RunSync = Callable[..., Awaitable[Any]]


class TurnModel(Protocol):
    """A blocking model: its turn holds a thread (see the module's text)."""

    def run(self, turn: ModelTurn, call_tool: CallTool, emit_text: EmitText) -> None: ...


class AsyncTurnModel(Protocol):
    """A model awaited on the engine's loop: it must never block."""

    async def run(self, turn: ModelTurn, call_tool: AsyncCallTool, emit_text: EmitText) -> None: ...


async def run_model(
    model: TurnModel | AsyncTurnModel,
    turn: ModelTurn,
    call_tool: AsyncCallTool,
    emit_text: EmitText,
) -> None:
    """Run either kind of model from the event loop."""
    if inspect.iscoroutinefunction(model.run):
        await model.run(turn, call_tool, emit_text)
        return
    loop = asyncio.get_running_loop()

    async def calling(name: str, arguments: dict[str, Any]) -> Any:
        return await call_tool(name, arguments)

    def call_tool_from_thread(name: str, arguments: dict[str, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(calling(name, arguments), loop).result()

    def emit_text_from_thread(piece: str) -> None:
        asyncio.run_coroutine_threadsafe(_emit(emit_text, piece), loop).result()

    # Not on a database thread: its tools need those threads while it waits for them.
    await asyncio.to_thread(model.run, turn, call_tool_from_thread, emit_text_from_thread)


async def _emit(emit_text: EmitText, piece: str) -> None:
    emit_text(piece)
