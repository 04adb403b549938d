"""The offline scripted model knows no project: tools by name, a project's rules as data."""

from __future__ import annotations

from typing import Any

import pytest

from poppy_django.agent import CompanyAgent, ToolContext, register, tool
from poppy_django.agent.scripted import Rule, Script
from tests.agents import PersonalAgent, messages

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = "scripted-own-tools"
parcels: list[str] = []


@tool(kind="read", roles=["personal_agent"])
def opening_times(ctx: ToolContext) -> dict[str, Any]:
    """When the counter is open."""
    return {"summary": "The counter is open 8 to 4."}


@tool(kind="read", roles=["personal_agent"])
def track_parcel(ctx: ToolContext, number: str) -> dict[str, Any]:
    """Where a parcel is (no summary: the model replies with the result)."""
    parcels.append(number)
    return {"number": number, "where": "depot"}


@tool(kind="action", roles=["scope:poppy:write"], summary="Hold parcel {number}")
def hold_parcel(ctx: ToolContext, number: str) -> dict[str, Any]:
    """Keep a parcel at the depot."""
    return {"held": number}


#: A project's own rules, as data (the example project's SCRIPT is another).
SCRIPT = Script(rules=[Rule(r"(?i)where is (?P<number>\d+)", "track_parcel")])
#: A rule naming a tool the agent does not have.
BROKEN = Script(rules=[Rule(r"(?i)hours", "store_hours")])


@pytest.fixture(autouse=True)
def own_agent(settings) -> None:
    register(CompanyAgent(name=AGENT, tools=[opening_times, track_parcel, hold_parcel]))
    settings.POPPY = {**settings.POPPY, "AGENT": AGENT, "MODEL": "scripted"}
    parcels.clear()


def reply(agent: PersonalAgent, text: str) -> dict[str, Any]:
    conversation_id = agent.start(text).json()["conversation_id"]
    return messages(agent.settled(conversation_id))[-1]


def test_a_tool_named_in_the_text_is_called_with_its_summary_as_the_reply(agent) -> None:
    assert reply(agent, "opening_times please")["text"] == "The counter is open 8 to 4."


def test_arguments_come_as_name_value_or_the_word_after_a_one_parameter_tool(agent) -> None:
    first = reply(agent, "track_parcel number=123")
    assert first["text"] == '{"number": "123", "where": "depot"}'
    second = reply(agent, "track_parcel 456, please")
    assert second["text"] == '{"number": "456", "where": "depot"}'
    assert parcels == ["123", "456"]


def test_a_call_the_tool_refuses_is_said_never_an_empty_message(agent) -> None:
    answer = reply(agent, "track_parcel")  # its one argument is missing
    # A sentence for a person, not pydantic's list ([{'type': 'missing', 'loc': ...}]).
    assert answer["text"] == "Sorry, I could not do that: track_parcel needs number."
    assert parcels == []


def test_an_action_by_name_is_told_by_the_action_formatter(acct1) -> None:
    writer = acct1.signed_in("acct-1", ("poppy:write",))
    answer = reply(writer, "hold_parcel number=77")
    assert answer["text"] == "Done: Hold parcel 77."
    assert answer["data"]["actions"][0]["status"] == "succeeded"


def test_text_naming_no_tool_is_echoed(agent) -> None:
    assert reply(agent, "open times?")["text"] == "You said: open times?"


def test_a_projects_rules_come_before_names(agent, settings) -> None:
    settings.POPPY = {**settings.POPPY, "MODEL": "scripted:tests.agent.test_scripted.SCRIPT"}
    answer = reply(agent, "Where is 42? not opening_times")
    assert answer["text"] == '{"number": "42", "where": "depot"}'


def test_a_rule_naming_a_missing_tool_says_so(agent, settings) -> None:
    settings.POPPY = {**settings.POPPY, "MODEL": "scripted:tests.agent.test_scripted.BROKEN"}
    answer = reply(agent, "your hours?")
    expected = "Sorry, I could not do that: There is no tool named 'store_hours'."
    assert answer["text"] == expected
