"""The desk's tags: set by staff (the service API), by the Company Agent's tools
(``ToolContext.tag``) and by ``POPPY["TAG_RULES"]``; staff only, never on the wire."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from pydantic_ai.models.test import TestModel

from poppy_django import service
from poppy_django.agent import CompanyAgent, ToolContext, register, tool
from poppy_django.conf import PoppySettings
from poppy_django.errors import PoppyError
from poppy_django.models import ConversationTag, DeskEvent, Tag
from poppy_django.testing import PersonalAgentClient, poppy_test_settings

pytestmark = pytest.mark.django_db


def started(text: str = "hello") -> tuple[PersonalAgentClient, str]:
    agent = PersonalAgentClient()
    reply = agent.send(text)
    assert reply.status_code == 201
    assert agent.conversation_id is not None
    return agent, agent.conversation_id


@poppy_test_settings()
def test_staff_tag_and_untag_a_conversation_each_change_on_the_desks_log() -> None:
    agent, conversation_id = started()
    added = service.tag(conversation_id, ["Refund", "vip customer", "refund"], by="sam")
    assert added == ["refund", "vip-customer"]
    assert service.tag(conversation_id, ["refund"], by="bob") == []  # had it already
    assert service.tags_of(conversation_id) == ["refund", "vip-customer"]
    assert service.untag(conversation_id, ["vip-customer", "never-had"], by="bob") == [
        "vip-customer"
    ]
    assert service.tags_of(conversation_id) == ["refund"]
    logged = [(entry.kind, entry.by, entry.other) for entry in service.desk_events(conversation_id)]
    assert logged == [
        ("tagged", "sam", "refund"),
        ("tagged", "sam", "vip-customer"),
        ("untagged", "bob", "vip-customer"),
    ]
    # Staff only: no event of the conversation's log, no read, names a tag.
    assert "refund" not in json.dumps(agent.events())


@poppy_test_settings()
@pytest.mark.parametrize("bad", ["", "  ", "no/slash", "x" * 51, 7, "émoji🙂"])
def test_a_name_that_cannot_be_a_tag_is_refused_and_nothing_is_written(bad: Any) -> None:
    _, conversation_id = started()
    with pytest.raises(PoppyError) as refused:
        service.tag(conversation_id, ["fine", bad], by="sam")
    assert refused.value.code == "invalid_request"
    assert not Tag.objects.exists() and not DeskEvent.objects.exists()


@poppy_test_settings()
def test_tagging_needs_a_staff_member_and_a_conversation() -> None:
    _, conversation_id = started()
    with pytest.raises(PoppyError) as nobody:
        service.tag(conversation_id, ["refund"], by="")
    assert nobody.value.code == "invalid_request"
    with pytest.raises(PoppyError) as unknown:
        service.tag("cnv_nothing", ["refund"], by="sam")
    assert unknown.value.code == "conversation_not_found"


@tool(roles=["personal_agent"])
def flag_for_billing(ctx: ToolContext) -> str:
    """Tag the conversation for the billing team."""
    ctx.tag("billing", "Needs Review")
    return "flagged"


@pytest.fixture
def tagging_agent(settings: Any) -> None:
    register(CompanyAgent(name="tagging", tools=[flag_for_billing]))


@pytest.mark.usefixtures("tagging_agent")
@poppy_test_settings(AGENT="tagging")
def test_a_tool_tags_the_conversation_with_the_turns_reply() -> None:
    agent = PersonalAgentClient(model=TestModel(call_tools=["flag_for_billing"]))
    reply = agent.send("please check my invoice")
    assert reply.status == "idle"
    tagged = ConversationTag.objects.filter(conversation_id=agent.conversation_id)
    assert sorted((row.tag.name, row.by) for row in tagged) == [
        ("billing", "company_agent"),
        ("needs-review", "company_agent"),
    ]
    assert "needs-review" not in json.dumps(agent.events())


@poppy_test_settings(TAG_RULES={"refund": ["refund", "money back"], "tent": ["tent pole"]})
def test_tag_rules_tag_what_the_customer_said_whole_words_any_case() -> None:
    agent, conversation_id = started("I want my MONEY BACK for the tent")
    assert service.tags_of(conversation_id) == ["refund"]
    assert ConversationTag.objects.get(conversation_id=conversation_id).by == "rule"
    assert not DeskEvent.objects.filter(conversation_id=conversation_id).exists()
    agent.send("refunds are slow")  # not the whole word "refund"
    assert service.tags_of(conversation_id) == ["refund"]
    agent.send("the Tent Pole snapped")
    assert service.tags_of(conversation_id) == ["refund", "tent"]


@pytest.mark.parametrize(
    "rules, named",
    [
        ({"Not A Tag": ["x"]}, "TAG_RULES"),
        ({"refund": []}, "TAG_RULES['refund']"),
        ({"refund": "refund"}, "TAG_RULES['refund']"),
        (["refund"], "TAG_RULES"),
    ],
)
def test_tag_rules_set_up_wrong_name_the_key(rules: Any, named: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=rf"POPPY\['{named[:9]}"):
        PoppySettings({"TAG_RULES": rules}).TAG_RULES
