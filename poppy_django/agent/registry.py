"""Company Agents by name: ``register(CompanyAgent(name="support", tools=[...]))``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.core.exceptions import ImproperlyConfigured

from poppy_django.agent.tool_problems import ToolProblem, duplicate_problems
from poppy_django.agent.tools import Tool
from poppy_django.conf import poppy_settings
from poppy_django.registries import Registry
from poppy_django.verifier import Principal

logger = logging.getLogger(__name__)


@dataclass
class CompanyAgent:
    """An agent the endpoint can answer with: its instructions and its tools.

    Which model runs it is a setting (``POPPY["MODEL"]`` / ``POPPY["MODELS"][name]``), so a
    deployment switches from the scripted model to a real LLM without a code change.
    """

    name: str
    instructions: str = "You are the company's support agent. Be brief and accurate."
    tools: list[Tool] = field(default_factory=list)

    def tool(self, name: str) -> Tool | None:
        return next((tool for tool in self.tools if tool.name == name), None)

    @property
    def problems(self) -> list[ToolProblem]:
        """What is wrong with its tools as declared (E401-E404, W401-W402), one each."""
        return [
            *(problem for tool in self.tools for problem in tool.problems),
            *duplicate_problems(self.name, (tool.name for tool in self.tools)),
        ]

    @property
    def personal_agent_tools(self) -> list[Tool]:
        """The personal-agent gate: only tools that declare a personal-agent role, and never
        one declared wrongly (checks E401-E404 name it), nor a second tool of one name."""
        offered: dict[str, Tool] = {}
        for tool in self.tools:
            if tool.offered_to_personal_agents and tool.usable:
                offered.setdefault(tool.name, tool)
        return list(offered.values())


class AgentFor(Protocol):
    """``POPPY["AGENT_FOR"]``: the name of the agent that answers a new conversation, given
    the caller and the first message's ``context`` (None: ``POPPY["AGENT"]``)."""

    def __call__(self, principal: Principal, context: dict[str, Any], /) -> str | None: ...


#: The Company Agents, by name.
agents: Registry[CompanyAgent] = Registry("Company Agents")


def register(agent: CompanyAgent) -> CompanyAgent:
    """Register (or replace) an agent; call it from your AppConfig.ready().

    A tool declared wrongly is refused here, out loud: each error is logged with its fix.
    Registration runs at start-up in every process (uvicorn's, the Celery workers'), which
    run no system checks, so the log is where the checks' E401-E404 reach them.
    """
    agents.register(agent.name, agent)
    for problem in agent.problems:
        if problem.stops_the_tool:
            logger.error(
                "poppy: Company Agent %r refuses a tool: %s %s (poppy_django.%s)",
                agent.name,
                problem.message,
                problem.hint,
                problem.code,
            )
    return agent


def get(name: str) -> CompanyAgent:
    found = agents.get(name)
    if found is None:
        raise ImproperlyConfigured(
            f"No Company Agent named {name!r} is registered (registered: {sorted(agents.names())})."
        )
    return found


def registered() -> dict[str, CompanyAgent]:
    return dict(agents.items())


def agent_for(principal: Principal, context: Mapping[str, Any] | None) -> str:
    """The agent that answers a new conversation: ``POPPY["AGENT_FOR"](principal, context)``
    (the first message's ``context``), else ``POPPY["AGENT"]``.

    The choice is kept on the conversation: its later turns, and its Direct Conversations,
    are answered by the same agent. A name no agent is registered under is told in the log,
    and ``AGENT`` answers instead (the conversation is not refused for a setting's mistake).
    """
    chooser: AgentFor | None = poppy_settings.AGENT_FOR
    if chooser is not None:
        chosen = chooser(principal, dict(context or {}))
        if chosen is not None and agents.get(chosen) is not None:
            return str(chosen)
        if chosen is not None:
            logger.warning(
                "poppy: AGENT_FOR chose %r, which is not a registered Company Agent "
                "(registered: %s); %r answers.",
                chosen,
                ", ".join(sorted(agents.names())),
                poppy_settings.AGENT,
            )
    return poppy_settings.AGENT
