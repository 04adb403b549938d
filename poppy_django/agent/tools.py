"""Tools the Company Agent can call: name, kind, roles, typed input, confirmation summary."""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Concatenate, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from poppy_django.agent.tool_problems import ToolProblem, declaration_problems
from poppy_django.store import tags
from poppy_django.verifier import Actor

ToolKind = Literal["read", "action"]
#: The roles a personal agent can hold: tools declaring none of these are never offered to one.
PERSONAL_AGENT_ROLE = "personal_agent"
SCOPE_ROLE_PREFIX = "scope:"


class ActionFailed(Exception):
    """Raised by a tool to report a failed action; its message is the outcome's ``error``."""


@dataclass
class Component:
    """A UI component a tool emits: ``data.components[]`` on the reply."""

    name: str
    props: dict[str, Any]
    fallback_text: str

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "props": self.props, "fallback_text": self.fallback_text}


@dataclass(repr=False)
class ToolContext:
    """What a tool knows about the turn calling it.

    Its ``repr`` names no actor, role or page context: a tool that hands its context on
    (to a reply, a log line, a result turned to text) shows nothing of the User.
    """

    actor: Actor
    roles: frozenset[str]
    conversation_id: str
    page_context: dict[str, Any]
    components: list[Component] = field(default_factory=list)
    #: For an action: stable per action (the same on a retried turn and when staff approve
    #: it), so a tool can pass it on as an idempotency key to the APIs it calls.
    call_key: str | None = None
    #: The desk's tags the tool put on the conversation (:meth:`tag`).
    tags: list[str] = field(default_factory=list)

    @property
    def account_id(self) -> str | None:
        return self.actor.account_id

    def emit_component(self, name: str, props: dict[str, Any], fallback_text: str) -> None:
        self.components.append(Component(name, props, fallback_text))

    def tag(self, *names: str) -> None:
        """Tag the conversation for the support desk ("refund", "vip"): staff see it and
        filter by it; never on the wire. Written with the turn's reply (a turn that writes
        none tags nothing). A name that cannot be a tag raises ``PoppyError``."""
        self.tags.extend(name for name in tags.normalized(names) if name not in self.tags)

    def __repr__(self) -> str:
        return "<ToolContext>"


#: A tool's function as written: a :class:`ToolContext` first, then keyword arguments whose
#: type hints are the tool's typed input; what it returns is the tool's result (awaited when
#: it is a coroutine function).
ToolFunction = Callable[Concatenate[ToolContext, ...], object]


@dataclass(frozen=True)
class Tool:
    """A callable the model may use. ``function(ctx, **arguments)``."""

    name: str
    kind: ToolKind
    roles: tuple[str, ...]
    function: ToolFunction
    description: str
    input_model: type[BaseModel]
    #: For actions: the confirmation the app would have shown ("Cancel order {order_id}").
    summary: str = ""
    #: For actions: a person at the desk must approve it before it runs.
    needs_approval: bool = False
    #: For actions: with the Operations extension on and negotiated, the call proposes an
    #: Operation the User confirms (docs/operations-extension.md) instead of running under
    #: the token's scope.
    operation: bool = False
    #: For actions proposing an Operation: whether the User may have it confirmed under a
    #: standing permission (``approved_by: standing_permission``, the operation's
    #: ``user_approval_required`` false) instead of approving each revision. True for every
    #: call, or ``bounds(arguments) -> bool``: only the calls within the company's bounds.
    standing_permission: bool | Callable[[dict[str, Any]], bool] = False
    #: Whether a docstring or ``description=`` says what it does (else W401).
    described: bool = True

    @functools.cached_property
    def problems(self) -> list[ToolProblem]:
        """What is wrong with it as declared (the checks' E401-E404, W401-W402)."""
        return declaration_problems(
            self.name,
            self.function,
            kind=self.kind,
            roles=self.roles,
            described=self.described,
            context_type=ToolContext,
        )

    @property
    def usable(self) -> bool:
        """No error among its problems: a turn may offer it."""
        return not any(problem.stops_the_tool for problem in self.problems)

    def __call__(self, ctx: ToolContext, /, **arguments: Any) -> Any:
        """Call the function as written, its arguments validated as a model's call is (a test
        calls a tool directly; :func:`poppy_django.testing.tool_context` builds ``ctx``).
        Roles are not checked here: a turn checks them before it calls."""
        return self.function(ctx, **self.validate(arguments))

    def allows_standing_permission(self, arguments: dict[str, Any]) -> bool:
        """Whether a proposal of this call may be confirmed under a standing permission."""
        allowed = self.standing_permission
        return bool(allowed(arguments)) if callable(allowed) else bool(allowed)

    @property
    def offered_to_personal_agents(self) -> bool:
        return any(
            role == PERSONAL_AGENT_ROLE or role.startswith(SCOPE_ROLE_PREFIX) for role in self.roles
        )

    def missing_scope(self, roles: frozenset[str]) -> str | None:
        """None when the roles reach the tool; else the scope to ask for."""
        if roles & set(self.roles):
            return None
        scopes = [
            role.removeprefix(SCOPE_ROLE_PREFIX)
            for role in self.roles
            if role.startswith(SCOPE_ROLE_PREFIX)
        ]
        return scopes[0] if scopes else ""

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.input_model.model_validate(arguments).model_dump()

    def describe_call(self, arguments: dict[str, Any]) -> str:
        try:
            return self.summary.format(**arguments) if self.summary else self.name
        except (KeyError, IndexError, ValueError):
            return self.summary

    def json_schema(self) -> dict[str, Any]:
        """The arguments' JSON schema (a copy: the caller may change it)."""
        return copy.deepcopy(_schema_of(self.input_model))


@functools.cache
def _schema_of(input_model: type[BaseModel]) -> dict[str, Any]:
    """Built once per model: pydantic's schema generation costs ~1 ms of CPU, and every
    LLM turn offers every tool, on the engine's loop shared with the process's other turns."""
    return input_model.model_json_schema()


def tool(
    *,
    name: str | None = None,
    kind: ToolKind = "read",
    roles: tuple[str, ...] | list[str] = (),
    summary: str = "",
    needs_approval: bool = False,
    operation: bool = False,
    standing_permission: bool | Callable[[dict[str, Any]], bool] = False,
    description: str | None = None,
) -> Callable[[ToolFunction], Tool]:
    """Declare a tool: ``@tool(kind="action", roles=["scope:poppy:write"], summary="...")``.

    The function takes a :class:`ToolContext` first, then keyword arguments whose type hints
    become the tool's typed input (validated before the call, advertised to LLMs as JSON
    Schema).
    """
    if needs_approval and kind != "action":
        raise ValueError("Only action tools can need approval.")
    if operation and kind != "action":
        raise ValueError("Only action tools can propose an Operation.")
    if standing_permission is not False and kind != "action":
        raise ValueError("Only action tools can be confirmed under a standing permission.")

    def decorate(function: ToolFunction) -> Tool:
        tool_name = name or function.__name__
        docstring = inspect.getdoc(function)
        return Tool(
            name=tool_name,
            kind=kind,
            roles=tuple(roles),
            function=function,
            description=description or docstring or tool_name,
            input_model=_input_model(tool_name, function),
            summary=summary,
            needs_approval=needs_approval,
            operation=operation,
            standing_permission=standing_permission,
            described=bool(description or docstring),
        )

    return decorate


def _input_model(tool_name: str, function: ToolFunction) -> type[BaseModel]:
    hints = inspect.get_annotations(function, eval_str=True)
    fields: dict[str, Any] = {}
    try:
        parameters = list(inspect.signature(function).parameters.values())[1:]  # skip ctx
    except (TypeError, ValueError):
        parameters = []  # E401 says why
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    for parameter in parameters:
        if parameter.kind not in named:
            continue  # *args, **kwargs: E402 (never fields the model must fill)
        annotation = hints.get(parameter.name, Any)
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    model: type[BaseModel] = create_model(
        f"{tool_name}_input", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model


def describe_invalid_arguments(tool_name: str, error: ValidationError) -> str:
    """A refused call in a sentence a person can read (it may reach the personal agent):
    "track_parcel needs number." or "track_parcel: quantity must be a whole number."

    pydantic's own ``errors()`` is a list of dicts (``[{'type': 'missing', 'loc': ...}]``)
    and its ``str()`` carries URLs; neither is for a User's eyes.
    """
    missing: list[str] = []
    wrong: list[str] = []
    for item in error.errors(include_url=False, include_input=False):
        name = ".".join(str(part) for part in item["loc"]) or "its arguments"
        if item["type"] == "missing":
            missing.append(name)
        elif item["type"] == "extra_forbidden":
            wrong.append(f"{name} is not one of its parameters")
        else:
            wrong.append(f"{name}: {str(item['msg'])[:1].lower()}{str(item['msg'])[1:]}")
    sentences: list[str] = []
    if missing:
        listed = ", ".join(missing[:-1]) + " and " + missing[-1] if len(missing) > 1 else missing[0]
        sentences.append(f"{tool_name} needs {listed}.")
    if wrong:
        sentences.append(f"{tool_name} cannot take {'; '.join(wrong)}.")
    return " ".join(sentences) or f"{tool_name} cannot take these arguments."
