"""Tools checked where agents are registered: each problem its own check id and fix
(docs/checks.md E401-E404, W401-W402), and a tool declared wrongly is never offered, so the
ToolContext never reaches a model or the wire."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core import checks

from poppy_django.agent import CompanyAgent, ToolContext, registry, tool
from poppy_django.testing import PersonalAgentClient, poppy_test_settings, tool_context


@tool(kind="read", roles=["personal_agent"])
def weather(city: str) -> dict[str, Any]:
    """The weather in a city (its first parameter is not the context)."""
    return {"summary": f"Sunny in {city}."}


@tool(kind="read", roles=["personal_agent"])
def anything(ctx: ToolContext, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Takes anything."""
    return {"summary": "ok"}


@tool(kind="read", roles=["personal_agent"])
def undocumented(ctx: ToolContext) -> dict[str, Any]:
    return {"summary": "ok"}


@tool(kind="write", roles=["personal_agent"])  # type: ignore[arg-type]
def unknown_kind(ctx: ToolContext) -> dict[str, Any]:
    """An unknown kind."""
    return {}


@tool(kind="read", roles=["personal-agent", "poppy:write"])
def mistyped_roles(ctx: ToolContext) -> dict[str, Any]:
    """Roles with typos."""
    return {}


@tool(kind="read", roles=["personal_agent"])
def hours(ctx: ToolContext) -> dict[str, Any]:
    """Opening hours."""
    return {"summary": "Always open."}


@tool(name="hours", kind="read", roles=["personal_agent"])
def hours_again(ctx: ToolContext) -> dict[str, Any]:
    """Opening hours, again."""
    return {"summary": "Never open."}


@pytest.fixture
def agent_named() -> Iterator[Any]:
    registered: list[str] = []

    def register(*tools: Any) -> str:
        name = f"checked-{len(registered)}"
        registry.register(CompanyAgent(name=name, tools=list(tools)))
        registered.append(name)
        return name

    yield register
    for name in registered:
        registry.agents.unregister(name)


def found(code: str) -> list[checks.CheckMessage]:
    return [m for m in checks.run_checks() if m.id == f"poppy_django.{code}"]


@pytest.mark.parametrize(
    ("tools", "code", "named", "fix"),
    [
        ((weather,), "E401", "'weather'", "def weather(ctx: ToolContext"),
        ((anything,), "E402", "*args, **kwargs", "Name each argument"),
        ((hours, hours_again), "E403", "2 tools named 'hours'", '@tool(name="...")'),
        ((unknown_kind,), "E404", "'write'", 'kind="read"'),
        ((undocumented,), "W401", "'undocumented' has no docstring", "docstring"),
        ((mistyped_roles,), "W402", "'personal-agent', 'poppy:write'", '"scope:poppy:write"'),
    ],
)
def test_each_problem_has_its_id_and_fix(agent_named, tools, code, named, fix) -> None:
    assert not found(code)
    agent_named(*tools)
    (message,) = found(code)
    assert named in message.msg and fix in (message.hint or ""), (message.msg, message.hint)


def test_a_tool_declared_wrongly_is_refused_out_loud_where_it_is_registered(
    agent_named, caplog
) -> None:
    """uvicorn and Celery run no checks: registering (at start-up, from ready()) logs each
    refused tool with its fix; a warning (W401) is left to the checks."""
    with caplog.at_level("ERROR", logger="poppy_django.agent.registry"):
        name = agent_named(weather, hours, hours_again, undocumented)
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 2, said
    assert said[0].startswith(f"poppy: Company Agent {name!r} refuses a tool: Tool 'weather'")
    assert "def weather(ctx: ToolContext" in said[0] and said[0].endswith("(poppy_django.E401)")
    assert "2 tools named 'hours'" in said[1] and "(poppy_django.E403)" in said[1]


def test_a_well_declared_agent_has_no_tool_problem(agent_named) -> None:
    agent_named(hours)
    assert not [m for m in checks.run_checks() if m.id and m.id.startswith("poppy_django.E40")]


def test_the_context_shows_nothing_of_the_user() -> None:
    ctx = tool_context(account_id="acct-secret", page_context={"page": "private"})
    assert repr(ctx) == str(ctx) == "<ToolContext>"


def test_args_and_kwargs_are_not_required_parameters() -> None:
    assert anything.json_schema().get("required", []) == []
    assert not anything.usable and weather.problems[0].code == "E401"


@pytest.mark.django_db(transaction=True)
def test_a_tool_declared_wrongly_is_not_offered(agent_named, settings) -> None:
    """The scripted model calls a tool its text names: the broken one is not there to call,
    and neither the context nor the account reaches the reply."""
    name = agent_named(weather, hours)
    with poppy_test_settings(AGENT=name, MODEL="scripted"):
        reply = PersonalAgentClient(account_id="acct-secret").send("weather Paris")
    assert reply.text and "ToolContext" not in reply.text and "acct-secret" not in reply.text
    assert "Sunny" not in reply.text
    assert [t.name for t in registry.get(name).personal_agent_tools] == ["hours"]
