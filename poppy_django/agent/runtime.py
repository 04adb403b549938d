"""Running one turn of the Company Agent: actor, roles, gated tools, actions, components.

The runtime touches the database only through action records; the turn's reply is written
by :mod:`poppy_django.engine.turns` in one transaction with the queue position, so a turn that
dies here leaves nothing half-written.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from poppy_django import ids, observe
from poppy_django.agent import actions, model_api, proposals, registry
from poppy_django.agent.guard import TurnAbandoned, TurnGuard
from poppy_django.agent.model_api import (
    AsyncTurnModel,
    ModelTurn,
    RunSync,
    TurnInput,
    TurnInterrupted,
    TurnModel,
)
from poppy_django.agent.tools import (
    PERSONAL_AGENT_ROLE,
    SCOPE_ROLE_PREFIX,
    Component,
    Tool,
    ToolContext,
    describe_invalid_arguments,
)
from poppy_django.conf import poppy_settings
from poppy_django.models import ActionStatus, AuthorizationError
from poppy_django.observe import tracing
from poppy_django.verifier import Actor, ActorFor, Principal

logger = logging.getLogger(__name__)

#: ``data.actions[].status`` values on the wire; an action awaiting staff is only told in text.
_WIRE_ACTION_STATUSES = (ActionStatus.SUCCEEDED, ActionStatus.FAILED, ActionStatus.REJECTED)


def default_actor(principal: Principal) -> Actor:
    """Signed in: the account. Signed out: ``poppy:<hash>``, never an account."""
    if principal.signed_in and principal.account_id:
        return Actor(id=principal.account_id, account_id=principal.account_id)
    return Actor(id=ids.anonymous_actor_id(principal.client_id, principal.user_id))


def resolve_actor(principal: Principal) -> Actor:
    """``principal.actor``, else ``POPPY["ACTOR_FOR"](principal, default)``, else the default."""
    if principal.actor is not None:
        return principal.actor
    default = default_actor(principal)
    actor_for: ActorFor | None = poppy_settings.ACTOR_FOR
    if actor_for is not None:
        chosen = actor_for(principal, default)
        if chosen is not None:
            return chosen
    return default


def roles_of(principal: Principal) -> frozenset[str]:
    """``personal_agent`` plus ``scope:<s>`` for each scope of a signed-in token."""
    scopes = principal.scopes if principal.signed_in else frozenset()
    return frozenset({PERSONAL_AGENT_ROLE} | {f"{SCOPE_ROLE_PREFIX}{s}" for s in scopes})


@dataclass(frozen=True)
class TurnRequest:
    """Everything a turn needs, planned (and persisted) before the model runs."""

    conversation_id: str
    turn_id: str
    #: The id of the company message this turn writes (stable across retries).
    message_id: str
    #: The ids of the user messages it answers.
    answered_message_ids: list[str]
    agent_name: str
    principal: Principal
    #: Who the turn acts for, resolved once (``ACTOR_FOR`` may be a query).
    actor: Actor
    inputs: list[TurnInput]
    history: list[dict[str, str]]
    page_context: dict[str, Any]
    #: When the oldest message it answers was acknowledged (its turn's start delay).
    received_at: datetime | None = None


@dataclass
class TurnOutcome:
    text: str = ""
    components: list[Component] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    #: The desk's tags the turn's tools put on the conversation (``ToolContext.tag``).
    tags: list[str] = field(default_factory=list)
    #: ``(error, scope)`` when a refused tool call ended the turn.
    authorization: tuple[str, str] | None = None
    failed: bool = False
    error: str = ""

    def message_text(self) -> str:
        """The text of the reply: the model's, components' fallbacks, or the actions told."""
        texts = poppy_settings.texts
        formatter: Callable[[dict[str, Any], dict[str, str]], str] = poppy_settings.ACTION_FORMATTER
        told = [formatter(action, texts) for action in self.actions]
        if self.actions and (
            not self.text.strip()
            or any(a["status"] != ActionStatus.SUCCEEDED for a in self.actions)
        ):
            return " ".join(told)
        if not self.text.strip() and self.components:
            return " ".join(component.fallback_text for component in self.components)
        return self.text

    def message_data(self) -> dict[str, Any] | None:
        data: dict[str, Any] = {}
        if self.components:
            data["components"] = [component.to_wire() for component in self.components]
        decided = [a for a in self.actions if a["status"] in _WIRE_ACTION_STATUSES]
        if decided:
            data["actions"] = decided
        data.update(self.message_members())
        return data or None

    def message_members(self) -> dict[str, Any]:
        """What a proposal among the actions adds to the reply (in its data, and as members
        of the message: :mod:`poppy_django.agent.proposals`)."""
        return proposals.message_members(self.actions)


class Toolbox:
    """The tools a turn offers, gated by the actor's roles, with actions run at most once."""

    def __init__(
        self, request: TurnRequest, ctx: ToolContext, guard: TurnGuard, run_sync: RunSync
    ) -> None:
        self.request = request
        self.run_sync = run_sync
        self.ctx = ctx
        self.guard = guard
        self.agent = registry.get(request.agent_name)
        self.offered = self.agent.personal_agent_tools
        self.actions: list[dict[str, Any]] = []
        self.refusal: tuple[str, str] | None = None
        self._occurrences: Counter[str] = Counter()

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call a tool for the model: an ``async def`` read awaited on the loop, everything
        blocking (sync reads, actions, their records) on the engine's database threads."""
        with tracing.span("poppy.tool", tool=name[:64], turn_id=self.request.turn_id):
            return await self._call(name, arguments)

    async def _call(self, name: str, arguments: dict[str, Any]) -> Any:
        if self.guard.abandoned:
            raise TurnAbandoned(f"{name} called after the turn's time limit")
        tool = next((t for t in self.offered if t.name == name), None)
        if tool is None:
            return {"error": f"There is no tool named {name!r}."}
        missing = tool.missing_scope(self.ctx.roles)
        if missing is not None:
            error = (
                AuthorizationError.INSUFFICIENT_SCOPE
                if self.request.principal.signed_in
                else AuthorizationError.SIGN_IN_REQUIRED
            )
            self.refusal = (error, missing)
            raise TurnInterrupted(f"{tool.name} needs {missing or 'another role'}")
        try:
            validated = tool.validate(arguments)
        except ValidationError as exc:
            return {"error": describe_invalid_arguments(name, exc)}
        if tool.kind == "read":
            if inspect.iscoroutinefunction(tool.function):
                return await tool.function(self.ctx, **validated)
            return await self.run_sync(tool.function, self.ctx, **validated)
        self._occurrences[name] += 1
        call = actions.ActionCall(
            conversation_id=self.request.conversation_id,
            turn_id=self.request.turn_id,
            occurrence=self._occurrences[name],
        )
        key = call.key(tool, validated)
        ctx = dataclasses.replace(self.ctx, call_key=key)
        outcome = await self.run_sync(_proposed_outcome, tool, validated, ctx, call, self.guard)
        self.actions.append(outcome)
        return outcome


def _proposed_outcome(
    tool: Tool,
    arguments: dict[str, Any],
    ctx: ToolContext,
    call: actions.ActionCall,
    guard: TurnGuard,
) -> dict[str, Any]:
    """Propose the action and word its record for the wire, both on a database thread (a
    proposal's members may be read from the database)."""
    return proposals.outcome_of(actions.propose(tool, arguments, ctx, call, guard))


async def run_turn(
    request: TurnRequest,
    model_for: Callable[[str], TurnModel | AsyncTurnModel],
    emit_text: Callable[[str], None],
    guard: TurnGuard,
    run_sync: RunSync,
) -> TurnOutcome:
    """Run the model for one turn; every failure becomes an outcome, never an exception.

    Failures include what surrounds the model: the ``ACTOR_FOR`` hook, an agent that is no
    longer registered, a model that cannot be built, a tool that raises. Cancellation (the
    turn's time limit) is not a failure here: it propagates to the caller.

    ``guard`` refuses what the turn still tries once abandoned; ``run_sync`` runs blocking
    work off the loop (the engine's database threads).
    """
    pieces: list[str] = []

    def write(piece: str) -> None:
        if piece:
            emit_text(piece)  # refused once the turn is abandoned: then it is not kept
            pieces.append(piece)

    outcome = TurnOutcome()
    ctx: ToolContext | None = None
    toolbox: Toolbox | None = None
    try:
        principal = request.principal
        ctx = ToolContext(
            actor=request.actor,
            roles=roles_of(principal),
            conversation_id=request.conversation_id,
            page_context=request.page_context,
        )
        toolbox = Toolbox(request, ctx, guard, run_sync)
        turn = ModelTurn(
            instructions=toolbox.agent.instructions,
            history=request.history,
            inputs=request.inputs,
            tools=toolbox.offered,
            page_context=request.page_context,
        )
        await model_api.run_model(model_for(request.agent_name), turn, toolbox.call, write)
    except TurnAbandoned:
        outcome.failed = True
        outcome.error = "abandoned at the turn's time limit"
    except TurnInterrupted:
        outcome.authorization = toolbox.refusal if toolbox is not None else None
    except Exception as exc:
        logger.exception("poppy: turn %s of %s failed", request.turn_id, request.conversation_id)
        outcome.failed = True
        outcome.error = observe.describe_failure(exc)
    outcome.text = "".join(pieces)
    outcome.components = ctx.components if ctx is not None else []
    outcome.tags = ctx.tags if ctx is not None else []
    outcome.actions = toolbox.actions if toolbox is not None else []
    return outcome
