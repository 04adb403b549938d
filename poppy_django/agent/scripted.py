"""The offline scripted model: deterministic rules on the latest user text, first match wins.

It is the embedded default, so demos and tests get the same answers every time with no
network. It knows no project's tools: a project reaches its own tools offline either by
naming them in the text (``track_parcel number=123``), or with rules it supplies as data
(a :class:`Script` that ``POPPY["MODEL"] = "scripted:<dotted path>"`` names). The order:

=================  ===============================================================
``#fail``          the model raises an error
``#slow``          "Let me check that for you." in pieces about 0.3 s apart (awaited)
``#history``       "I see N messages; the first was: <first user text>."
the project rules  each :class:`Rule` in order: its pattern matches → its tool is called
a tool's name      a tool the turn offers, named as a word → it is called
otherwise          "You said: <text>" word by word, with " (data: <JSON>)" for data
=================  ===============================================================

A turn that calls a read tool always replies (the result's ``summary``, else the result as
JSON, else why the call failed), so a company message is never empty; an action's outcome
is worded by ``ACTION_FORMATTER``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from poppy_django.agent.model_api import AsyncCallTool, EmitText, ModelTurn, TurnInput
from poppy_django.agent.tools import Tool

_WORDS = re.compile(r"\S+\s*")
#: ``name=value`` or ``name="several words"`` in the text: arguments for a tool named there.
_ARGUMENT = re.compile(r"""(?P<name>[A-Za-z_]\w*)=(?:"(?P<quoted>[^"]*)"|(?P<plain>\S+))""")


class ScriptedModelError(RuntimeError):
    """What ``#fail`` raises."""


@dataclass(frozen=True)
class Rule:
    """When ``pattern`` matches the latest user text, call ``tool``.

    The pattern's named groups are the tool's arguments (``(?P<order_id>[A-Z]-\\d+)``);
    ``arguments`` adds fixed ones. ``reply=False`` writes no text of its own: for a tool
    whose component (fallback text) or action outcome is the reply. ``pattern`` is a
    Python regular expression searched in the text as written (``(?i)`` ignores case).
    """

    pattern: str
    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    reply: bool = True

    def match(self, text: str) -> dict[str, Any] | None:
        found = re.search(self.pattern, text)
        if found is None:
            return None
        groups = {name: value for name, value in found.groupdict().items() if value is not None}
        return {**self.arguments, **groups}


@dataclass(frozen=True)
class Script:
    """A project's rules for the scripted model (``POPPY["MODEL"] = "scripted:path.to.SCRIPT"``).

    ``call_tools_by_name=False`` turns the by-name rule off, so that text matching none of
    the rules is always echoed (the example project's fixed contract).
    """

    rules: Sequence[Rule] = ()
    call_tools_by_name: bool = True


class ScriptedModel:
    """``POPPY["MODEL"] = "scripted"`` (no project rules) or ``"scripted:<path to a Script>"``."""

    #: Seconds between the pieces of ``#slow``.
    slow_interval = 0.3

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()

    async def run(self, turn: ModelTurn, call_tool: AsyncCallTool, emit_text: EmitText) -> None:
        latest = next((item for item in reversed(turn.inputs) if item.text), None)
        text = latest.text if latest and latest.text else ""
        lowered = text.lower()
        if "#fail" in lowered:
            raise ScriptedModelError("The scripted model was asked to fail (#fail).")
        if "#slow" in lowered:
            for piece in ("Let me ", "check that ", "for you."):
                emit_text(piece)
                await asyncio.sleep(self.slow_interval)  # waits without holding a thread
            return
        if "#history" in lowered:
            users = [entry["text"] for entry in turn.history if entry["role"] == "user"]
            users += [item.render() for item in turn.inputs]
            first = users[0] if users else ""
            emit_text(f"I see {len(users)} messages; the first was: {first}.")
            return
        for rule in self.script.rules:
            arguments = rule.match(text)
            if arguments is not None:
                tool = _offered(turn, rule.tool)
                await _call(call_tool, emit_text, rule.tool, arguments, tool, reply=rule.reply)
                return
        if self.script.call_tools_by_name:
            for tool in turn.tools:
                arguments = _named_call(tool, text)
                if arguments is not None:
                    await _call(call_tool, emit_text, tool.name, arguments, tool, reply=True)
                    return
        _echo(text, latest or (turn.inputs[-1] if turn.inputs else None), emit_text)


def load_script(path: str) -> Script:
    """The :class:`Script` (or a list of :class:`Rule`) at a dotted path."""
    try:
        found = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"The scripted model's rules {path!r}: {exc}") from exc
    if isinstance(found, Script):
        return found
    if isinstance(found, list | tuple) and all(isinstance(rule, Rule) for rule in found):
        return Script(rules=tuple(found))
    raise ImproperlyConfigured(
        f"{path!r} must be a poppy_django.agent.scripted.Script or a list of Rule, "
        f"not {type(found).__name__}."
    )


def _offered(turn: ModelTurn, name: str) -> Tool | None:
    return next((tool for tool in turn.tools if tool.name == name), None)


def _named_call(tool: Tool, text: str) -> dict[str, Any] | None:
    """The arguments when ``text`` names ``tool`` as a word; None when it does not name it.

    Arguments are ``name=value`` pairs; a tool with one required parameter also takes the
    word right after its name (``order_status A-1``).
    """
    named = re.search(rf"(?<![\w-]){re.escape(tool.name)}(?![\w-])", text, re.IGNORECASE)
    if named is None:
        return None
    schema = tool.json_schema()
    parameters = set(schema.get("properties", {}))
    arguments: dict[str, Any] = {}
    for found in _ARGUMENT.finditer(text):
        if found["name"] in parameters:
            value = found["quoted"] if found["quoted"] is not None else found["plain"]
            arguments[found["name"]] = value
    required = [name for name in schema.get("required", []) if name not in arguments]
    if len(required) == 1 and len(schema.get("required", [])) == 1:
        following = text[named.end() :].split()
        if following and "=" not in following[0]:
            arguments[required[0]] = following[0].rstrip(".,;:!?")
    return arguments


async def _call(
    call_tool: AsyncCallTool,
    emit_text: EmitText,
    name: str,
    arguments: dict[str, Any],
    tool: Tool | None,
    *,
    reply: bool,
) -> None:
    result = await call_tool(name, arguments)
    refused = isinstance(result, dict) and set(result) == {"error"}
    if refused:  # no such tool offered, or invalid arguments: say so rather than nothing
        emit_text(f"Sorry, I could not do that: {result['error']}")
    elif reply and (tool is None or tool.kind == "read"):
        emit_text(_summary(result))


def _echo(text: str, source: TurnInput | None, emit_text: EmitText) -> None:
    data = source.data if source else None
    reply = f"You said: {text}"
    if data is not None:
        reply += f" (data: {json.dumps(data)})"
    for word in _WORDS.findall(reply):
        emit_text(word)


def _summary(result: Any) -> str:
    if isinstance(result, dict) and isinstance(result.get("summary"), str) and result["summary"]:
        return str(result["summary"])
    return json.dumps(result, default=str)
