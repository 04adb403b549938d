"""The contract between a turn and the model that answers it.

A model receives the turn (history, new inputs, offered tools, page context), calls tools
through ``call_tool`` and writes its reply through ``emit_text`` piece by piece, as it is
produced. Raising from ``run`` fails the turn; ``call_tool`` may raise
:class:`TurnInterrupted` (a refused call), which the model must let propagate.
"""

from __future__ import annotations

import json
from collections.abc import Callable
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
EmitText = Callable[[str], None]


class TurnModel(Protocol):
    def run(self, turn: ModelTurn, call_tool: CallTool, emit_text: EmitText) -> None: ...
