"""The offline scripted model: deterministic rules on the latest user text, first match wins.

It is the embedded default and what the example project runs, so demos, tests and other
tools get the same answers every time with no network. The rules (``ORDER`` is a capital
letter, a dash and digits):

============  ==================================================================
``#fail``     the model raises an error
``#slow``     "Let me check that for you." in pieces about 0.3 s apart
``#history``  "I see N messages; the first was: <first user text>."
``hours``     calls ``store_hours`` and replies with its summary
``orders``    calls ``list_orders`` and replies with its summary
``cancel O``  calls the action ``cancel_order`` for O, writes no text
``status of`` calls ``order_status`` for O (it emits the ``order_card`` component)
otherwise     "You said: <text>" word by word, with " (data: <JSON>)" for data
============  ==================================================================
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from poppy_django.agent.model_api import CallTool, EmitText, ModelTurn

ORDER = r"[A-Z]-\d+"
_CANCEL = re.compile(rf"cancel\s+({ORDER})")
_STATUS = re.compile(rf"status of\s+({ORDER})")
_WORDS = re.compile(r"\S+\s*")


class ScriptedModelError(RuntimeError):
    """What ``#fail`` raises."""


class ScriptedModel:
    """``POPPY["MODEL"] = "scripted"``."""

    #: Seconds between the pieces of ``#slow``.
    slow_interval = 0.3

    def run(self, turn: ModelTurn, call_tool: CallTool, emit_text: EmitText) -> None:
        latest = next((item for item in reversed(turn.inputs) if item.text), None)
        text = latest.text if latest and latest.text else ""
        lowered = text.lower()
        if "#fail" in lowered:
            raise ScriptedModelError("The scripted model was asked to fail (#fail).")
        if "#slow" in lowered:
            for piece in ("Let me ", "check that ", "for you."):
                emit_text(piece)
                time.sleep(self.slow_interval)
            return
        if "#history" in lowered:
            users = [entry["text"] for entry in turn.history if entry["role"] == "user"]
            users += [item.render() for item in turn.inputs]
            first = users[0] if users else ""
            emit_text(f"I see {len(users)} messages; the first was: {first}.")
            return
        if "hours" in lowered:
            emit_text(_summary(call_tool("store_hours", {})))
            return
        if "orders" in lowered:
            emit_text(_summary(call_tool("list_orders", {})))
            return
        if match := _CANCEL.search(text):
            call_tool("cancel_order", {"order_id": match.group(1)})
            return
        if match := _STATUS.search(text):
            call_tool("order_status", {"order_id": match.group(1)})
            return
        source = latest or (turn.inputs[-1] if turn.inputs else None)
        data = source.data if source else None
        reply = f"You said: {text}"
        if data is not None:
            reply += f" (data: {json.dumps(data)})"
        for word in _WORDS.findall(reply):
            emit_text(word)


def _summary(result: Any) -> str:
    if isinstance(result, dict) and isinstance(result.get("summary"), str):
        return result["summary"]
    return json.dumps(result)
