"""poppy_django.testing as an adopter uses it (docs/testing.md): Django's TestCase and
TransactionTestCase, here on the suite's database (PostgreSQL in make test; the tutorial's
test runs the same kit on SQLite with IMMEDIATE transactions, under manage.py test and
pytest-django alike)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import TestCase, TransactionTestCase

from example_project.shop.agent import list_orders, store_hours
from example_project.shop.models import Order
from example_project.shop.seed import seed_orders
from poppy_django.models import Conversation, MessageReceipt
from poppy_django.testing import (
    PersonalAgentClient,
    answer_turns,
    call_tool,
    poppy_test_settings,
    tool_context,
)


class ToolsCalledDirectly(TestCase):
    def test_a_tool_is_called_with_a_built_context(self) -> None:
        self.assertIn("We are open", store_hours(tool_context())["summary"])

    def test_the_context_is_the_actor_a_turn_would_have(self) -> None:
        seed_orders(Order)
        ctx = tool_context(account_id="acct-1", scopes=["poppy:read"])
        self.assertEqual(ctx.account_id, "acct-1")
        self.assertIn("scope:poppy:read", ctx.roles)
        orders = call_tool(list_orders, ctx)["orders"]
        self.assertEqual({order["id"] for order in orders}, {"A-1", "A-2"})

    def test_signed_out_the_actor_is_no_account(self) -> None:
        ctx = tool_context()
        self.assertIsNone(ctx.account_id)
        self.assertTrue(ctx.actor.id.startswith("poppy:"))
        self.assertEqual(ctx.roles, frozenset({"personal_agent"}))

    def test_arguments_are_validated_as_a_models_call_is(self) -> None:
        from pydantic import ValidationError

        from example_project.shop.agent import order_status

        with self.assertRaises(ValidationError):
            order_status(tool_context(), order="A-1")


@poppy_test_settings()
class ConversationsInATestCase(TestCase):
    def test_a_reply_is_answered_inline(self) -> None:
        reply = PersonalAgentClient().send("What are your hours?", message_id="m-1")
        self.assertEqual(reply.status_code, 201)
        self.assertIn("We are open", reply.text or "")
        self.assertEqual(reply.status, "idle")
        self.assertEqual(
            [event["type"] for event in reply.events], ["message", "state", "message", "state"]
        )

    def test_the_same_message_id_again_starts_anew(self) -> None:
        """The receipt of the test before was rolled back with it (was a 409)."""
        self.assertFalse(MessageReceipt.objects.exists())
        agent = PersonalAgentClient(user_id="same-user")
        first = agent.send("What are your hours?", message_id="m-1")
        self.assertEqual(first.status_code, 201)

    def test_the_same_message_id_again_is_rolled_back_too(self) -> None:
        self.test_the_same_message_id_again_starts_anew()

    def test_signed_out_the_scope_is_asked_for(self) -> None:
        reply = PersonalAgentClient().send("orders")
        self.assertEqual(reply.authorization["error"], "sign_in_required")
        self.assertEqual(reply.authorization["scope"], "poppy:read")

    def test_signed_in_with_the_scope_the_tool_runs(self) -> None:
        seed_orders(Order)
        agent = PersonalAgentClient()
        agent.send("orders")
        reply = agent.signed_in("acct-1", scopes=["poppy:read"]).send("orders")
        self.assertIn("A-1", reply.text or "")

    def test_a_pydantic_ai_test_model_answers(self) -> None:
        from pydantic_ai.models.test import TestModel

        model = TestModel(call_tools=["store_hours"], custom_output_text="Open as the tool said.")
        reply = PersonalAgentClient(model=model).send("hours?")
        self.assertEqual(reply.text, "Open as the tool said.")

    def test_nothing_is_left_behind(self) -> None:
        PersonalAgentClient().send("What are your hours?")
        self.assertEqual(answer_turns(), {})


class AfterTheTestCase(TestCase):
    def test_its_conversations_were_rolled_back(self) -> None:
        self.assertFalse(Conversation.objects.exists())


@poppy_test_settings()
class ConversationsInATransactionTestCase(TransactionTestCase):
    def test_an_action_runs_and_is_reported(self) -> None:
        seed_orders(Order)
        agent = PersonalAgentClient(account_id="acct-1", scopes=["poppy:read", "poppy:write"])
        reply = agent.send("status of A-2")
        self.assertIn("A-2", reply.text or "")
        self.assertTrue(Conversation.objects.filter(pk=agent.conversation_id).exists())


@pytest.mark.django_db
@poppy_test_settings()
def test_pytest_django_style(settings: Any) -> None:
    reply = PersonalAgentClient().send("What are your hours?")
    assert reply.deltas and "".join(reply.deltas) in (reply.text or "")
