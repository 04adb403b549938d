"""Several Company Agents: POPPY["AGENT_FOR"] picks the agent of a new conversation (by
client, signed-in state, the first message's context), and a fallback model chain per agent
(pydantic-ai's FallbackModel) answers when its first model is down (docs/agent.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from poppy_django.agent import CompanyAgent, ToolContext, registry, tool
from poppy_django.models import Conversation
from poppy_django.testing import PersonalAgentClient, poppy_test_settings
from poppy_django.verifier import Principal
from tests.multiprocess.cluster import free_port


@tool(kind="read", roles=["personal_agent"])
def vip_desk(ctx: ToolContext) -> dict[str, Any]:
    """The VIP desk's hours."""
    return {"summary": "The VIP desk is open around the clock."}


def choose(principal: Principal, context: dict[str, Any]) -> str | None:
    """The tests' AGENT_FOR: partners by context, signed-in Users to the VIP agent."""
    if context.get("channel") == "partners":
        return "partners"
    return "vip" if principal.signed_in else None


@pytest.fixture(autouse=True)
def agents() -> Iterator[None]:
    registry.register(CompanyAgent(name="vip", tools=[vip_desk]))
    yield
    registry.agents.unregister("vip")


CHOSEN = "tests.agent.test_agent_choice.choose"
#: Each agent its own model: the VIP agent the plain scripted one (tools called by name).
MODELS = {"vip": "scripted"}


def agent_of(client: PersonalAgentClient) -> str:
    return Conversation.objects.get(pk=client.conversation_id).agent_name


@pytest.mark.django_db
def test_signed_out_conversations_go_to_the_default_agent() -> None:
    with poppy_test_settings(AGENT_FOR=CHOSEN):
        client = PersonalAgentClient()
        reply = client.send("What are your hours?")
    assert agent_of(client) == "support"
    assert "We are open" in (reply.text or "")


@pytest.mark.django_db
def test_signed_in_conversations_go_to_the_vip_agent_and_stay_there() -> None:
    with poppy_test_settings(AGENT_FOR=CHOSEN, MODELS=MODELS):
        client = PersonalAgentClient(account_id="acct-1", scopes=["poppy:read"])
        reply = client.send("vip_desk")
        assert agent_of(client) == "vip"
        assert reply.text == "The VIP desk is open around the clock."
        again = client.send("vip_desk")
    assert again.text == "The VIP desk is open around the clock."


@pytest.mark.django_db
def test_an_unregistered_choice_is_logged_and_the_default_answers(caplog) -> None:
    with poppy_test_settings(AGENT_FOR=CHOSEN):
        client = PersonalAgentClient()
        reply = client.send("hours?", context={"channel": "partners"})
    assert agent_of(client) == "support" and reply.status_code == 201
    assert "AGENT_FOR chose 'partners'" in caplog.text


# -- a fallback chain ------------------------------------------------------------------------


@pytest.fixture
def provider_down(monkeypatch) -> str:
    """An OpenAI-compatible provider where nothing listens."""
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    return "openai-chat:gpt-down"


@pytest.mark.django_db
def test_the_next_model_of_the_chain_answers_when_the_first_is_down(provider_down) -> None:
    with poppy_test_settings(MODELS={"support": [provider_down, "test"]}):
        reply = PersonalAgentClient().send("What are your hours?")
    # pydantic-ai's TestModel answered: it calls every tool offered, and the first that
    # needs a scope ended the turn asking for it (no failed-turn message).
    assert not [m for m in reply.company_messages if "went wrong" in m.get("text", "")]
    assert reply.authorization and reply.authorization["error"] == "sign_in_required"


@pytest.mark.django_db
def test_a_chain_whose_models_are_all_down_is_a_failed_turn(provider_down) -> None:
    with poppy_test_settings(MODELS={"support": [provider_down, provider_down + "-too"]}):
        reply = PersonalAgentClient().send("What are your hours?")
    assert "went wrong" in (reply.text or ""), reply.events


def test_a_chain_with_the_scripted_model_is_refused_by_the_checks() -> None:
    from django.core import checks

    with poppy_test_settings(MODELS={"support": ["scripted", "test"]}):
        found = [m for m in checks.run_checks() if m.id == "poppy_django.W006"]
    assert found and "fallback chain" in found[0].msg
