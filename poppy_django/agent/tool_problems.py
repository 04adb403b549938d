"""What is wrong with a tool as declared, reported for the agents registered (checks
E401-E404, W401-W402; docs/checks.md).

A tool is a function the model calls with keyword arguments, after the :class:`ToolContext`
the turn passes first. A function that takes something else first would get the context
as that argument (and could send it on: to the model, or to the wire); ``*args`` and
``**kwargs`` cannot be described to a model. A turn never offers a tool with such a problem
(:meth:`CompanyAgent.personal_agent_tools`), and ``manage.py check`` names each one.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

KINDS = ("read", "action")
PERSONAL_AGENT_ROLE = "personal_agent"
SCOPE_ROLE_PREFIX = "scope:"
#: Unannotated first parameters taken to be the context by their name.
CONTEXT_NAMES = frozenset({"ctx", "context", "_ctx", "_context", "_"})


@dataclass(frozen=True)
class ToolProblem:
    """One problem: its check id (``E401``), what is wrong, and the fix."""

    code: str
    message: str
    hint: str

    @property
    def stops_the_tool(self) -> bool:
        """Errors: a turn does not offer the tool at all."""
        return self.code.startswith("E")


def signature_problems(
    name: str, function: Callable[..., object], context_type: type
) -> list[ToolProblem]:
    """E401 (the first parameter is not the ``context_type``), E402 (``*args``/``**kwargs``)."""
    problems: list[ToolProblem] = []
    try:
        parameters = list(inspect.signature(function).parameters.values())
        hints = inspect.get_annotations(function, eval_str=True)
    except (TypeError, ValueError, NameError) as exc:
        return [
            ToolProblem(
                "E401",
                f"Tool {name!r}: its signature cannot be read ({exc}).",
                f"Write it as def {name}(ctx: ToolContext, ...) with importable type hints.",
            )
        ]
    first = parameters[0] if parameters else None
    expected = f"def {name}(ctx: ToolContext, <your arguments>)"
    if first is None or first.kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        problems.append(
            ToolProblem(
                "E401",
                f"Tool {name!r} takes no ToolContext first: a turn passes one as the first "
                "argument.",
                f"Make the context its first parameter: {expected}.",
            )
        )
    else:
        annotation = hints.get(first.name, inspect.Parameter.empty)
        annotated_context = isinstance(annotation, type) and issubclass(annotation, context_type)
        unannotated_context = annotation is inspect.Parameter.empty and first.name in CONTEXT_NAMES
        if not (annotated_context or unannotated_context):
            problems.append(
                ToolProblem(
                    "E401",
                    f"Tool {name!r}: its first parameter {first.name!r} is not the "
                    "ToolContext, yet a turn passes the context there (the model would see "
                    "no such parameter, and the context could reach the reply).",
                    f"Make the context its first parameter: {expected}.",
                )
            )
    variadic = [
        ("*" if p.kind is inspect.Parameter.VAR_POSITIONAL else "**") + p.name
        for p in parameters
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    if variadic:
        problems.append(
            ToolProblem(
                "E402",
                f"Tool {name!r} takes {', '.join(variadic)}: a model is told each argument a "
                "tool takes, by name and type, and cannot fill these.",
                "Name each argument with its type hint: def "
                f"{name}(ctx: ToolContext, order_id: str, quantity: int = 1).",
            )
        )
    return problems


def declaration_problems(
    name: str,
    function: Callable[..., object],
    *,
    kind: str,
    roles: Iterable[str],
    described: bool,
    context_type: type,
) -> list[ToolProblem]:
    """A tool's own problems: its signature's, W401 (no docstring), E404 (an unknown kind),
    W402 (a role no turn's actor holds)."""
    problems = signature_problems(name, function, context_type)
    if not described:
        problems.append(
            ToolProblem(
                "W401",
                f"Tool {name!r} has no docstring: the model reads only its name to decide "
                "when to call it.",
                'Say in its docstring what it does and when to use it (or pass description="...").',
            )
        )
    if kind not in KINDS:
        problems.append(
            ToolProblem(
                "E404",
                f"Tool {name!r} has the kind {kind!r}.",
                'Use kind="read" (runs whenever the model calls it) or kind="action" '
                "(changes something: recorded, run at most once).",
            )
        )
    mistaken = [role for role in roles if _mistaken_role(role)]
    if mistaken:
        problems.append(
            ToolProblem(
                "W402",
                f"Tool {name!r} declares {', '.join(map(repr, mistaken))}: no turn's actor "
                "holds such a role (a turn's actor holds personal_agent, and scope:<s> for each "
                "scope of a signed-in token), so no personal agent can use it.",
                'Use "personal_agent" or "scope:<scope>" (e.g. "scope:poppy:write").',
            )
        )
    return problems


def duplicate_problems(agent_name: str, tool_names: Iterable[str]) -> list[ToolProblem]:
    """E403 for a name two tools of one agent share."""
    problems = []
    counts = Counter(tool_names)
    for name, count in sorted(counts.items()):
        if count > 1:
            problems.append(
                ToolProblem(
                    "E403",
                    f"Agent {agent_name!r} has {count} tools named {name!r}: the model calls a "
                    "tool by its name.",
                    f'Give each its own name: @tool(name="...") on all but one of the {name!r}.',
                )
            )
    return problems


def _mistaken_role(role: str) -> bool:
    """A role meant for personal agents, mistyped: ``"personal-agent"``, ``"poppy:write"``
    (no ``scope:``), ``"scope:"``. Other roles (a staff-only tool's) are the project's own."""
    if role == PERSONAL_AGENT_ROLE:
        return False
    if role.startswith(SCOPE_ROLE_PREFIX):
        return not role.removeprefix(SCOPE_ROLE_PREFIX).strip()
    squeezed = "".join(character for character in role.lower() if character.isalnum())
    return squeezed in {"personalagent", "scope"} or ":" in role
