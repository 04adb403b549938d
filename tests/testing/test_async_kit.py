"""The test kit in ``async def`` tests (docs/testing.md, "Async tests"): Django's async test
methods in ``TestCase`` and ``TransactionTestCase``, Django's own ``AsyncClient`` on the
endpoint, pytest functions with the plugin's fixture, and no background loop started by a
test that did not ask. Here on the suite's database (PostgreSQL in make test); the tutorial's
test runs an async test of the reader's own under both runners on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading

import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from django.db import connection
from django.test import TestCase, TransactionTestCase

from example_project.shop.agent import list_orders, store_hours
from example_project.shop.models import Order
from example_project.shop.seed import seed_orders
from poppy_django.engine.executors import ThreadExecutor
from poppy_django.models import Conversation
from poppy_django.testing import (
    AsyncPersonalAgentClient,
    PersonalAgentClient,
    aanswer_turns,
    acall_tool,
    answer_turns,
    background_loops,
    call_tool,
    poppy_test_settings,
    tool_context,
)
from poppy_django.verifier.fake import fake_authorization


def _sweeping() -> bool:
    return any(thread.name == "poppy-recovery" for thread in threading.enumerate())


@poppy_test_settings()
class AsyncConversationsInATestCase(TestCase):
    async def test_a_reply_is_answered_inline(self) -> None:
        reply = await AsyncPersonalAgentClient().send("What are your hours?", message_id="m-1")
        self.assertEqual(reply.status_code, 201)
        self.assertIn("We are open", reply.text or "")
        self.assertEqual(reply.status, "idle")
        self.assertTrue(reply.deltas)

    async def test_signed_in_with_the_scope_the_tool_runs(self) -> None:
        await sync_to_async(seed_orders)(Order)
        agent = AsyncPersonalAgentClient()
        reply = await agent.send("orders")
        self.assertEqual(reply.authorization["error"], "sign_in_required")
        reply = await agent.signed_in("acct-1", scopes=["poppy:read"]).send("orders")
        self.assertIn("A-1", reply.text or "")

    async def test_what_the_test_wrote_is_in_its_transaction(self) -> None:
        agent = AsyncPersonalAgentClient()
        await agent.send("What are your hours?")
        exists = Conversation.objects.filter(pk=agent.conversation_id).aexists
        self.assertTrue(await exists())

    async def test_djangos_async_client_on_the_endpoint(self) -> None:
        """docs/testing.md "Without the client": the fake verifier's header, then the turns
        answered (was a 500 on SQLite: the request wrote from another thread)."""
        response = await self.async_client.post(
            "/poppy/conversations",
            json.dumps({"message": {"id": "m-1", "sender": "agent", "text": "hours?"}}),
            content_type="application/json",
            headers={"Authorization": fake_authorization("https://pa.example/c", "u-1")},
        )
        self.assertEqual(response.status_code, 201, response.content)
        conversation_id = response.json()["conversation_id"]
        answered = await aanswer_turns()
        self.assertIn("We are open", "".join(answered[conversation_id]))

    async def test_tools_are_called_from_async_tests(self) -> None:
        self.assertIn("We are open", (await acall_tool(store_hours))["summary"])
        await sync_to_async(seed_orders)(Order)
        ctx = await sync_to_async(tool_context)(account_id="acct-1", scopes=["poppy:read"])
        orders = (await acall_tool(list_orders, ctx))["orders"]
        self.assertEqual({order["id"] for order in orders}, {"A-1", "A-2"})

    async def test_the_sync_kit_names_its_async_counterpart(self) -> None:
        for call in (
            lambda: PersonalAgentClient().send("hours?"),
            answer_turns,
            lambda: call_tool(store_hours),
        ):
            with self.assertRaisesMessage(RuntimeError, "in an async def test, await"):
                call()


class AfterTheAsyncTestCase(TestCase):
    def test_its_conversations_were_rolled_back(self) -> None:
        self.assertFalse(Conversation.objects.exists())


@poppy_test_settings()
class AsyncConversationsInATransactionTestCase(TransactionTestCase):
    async def test_an_action_runs_and_is_committed(self) -> None:
        await sync_to_async(seed_orders)(Order)
        agent = AsyncPersonalAgentClient(account_id="acct-1", scopes=["poppy:read", "poppy:write"])
        reply = await agent.send("status of A-2")
        self.assertIn("A-2", reply.text or "")
        self.assertTrue(await Conversation.objects.filter(pk=agent.conversation_id).aexists())


class NoLoopUnlessAsked(TestCase):
    """An adopter's async test of a page of their own starts no recovery sweep (it printed
    "the recovery sweep failed" once the test database was gone, and held a connection)."""

    def setUp(self) -> None:
        ThreadExecutor.shutdown(wait=True)  # the suite's earlier tests asked for the loops

    async def test_an_unrelated_async_view_starts_none(self) -> None:
        with background_loops(False):  # as in an adopter's test run
            response = await self.async_client.get("/admin/login/")
        self.assertEqual(response.status_code, 200)
        self.assertFalse(_sweeping())

    async def test_a_test_that_asks_gets_them(self) -> None:
        with background_loops():
            await self.async_client.get("/admin/login/")
        self.assertTrue(_sweeping())
        await sync_to_async(ThreadExecutor.shutdown)(wait=True)


def _connected() -> bool:
    return connection.connection is not None


@pytest.mark.anyio
async def test_a_pytest_function_with_the_plugins_fixture(
    async_personal_agent: AsyncPersonalAgentClient,
) -> None:
    reply = await async_personal_agent.send("What are your hours?")
    assert "We are open" in (reply.text or "")
    assert await Conversation.objects.filter(pk=async_personal_agent.conversation_id).aexists()
    # Its database work ran on asgiref's thread for thread-sensitive calls, connected now.
    assert await sync_to_async(_connected)()


def test_the_fixture_left_no_connection_open() -> None:
    """After the test above: the thread its database work ran on holds no connection (but
    for SQLite's in-memory test database, which Django never closes: that would drop it)."""
    if connection.vendor != "sqlite":
        assert not SyncToAsync.single_thread_executor.submit(_connected).result()


@pytest.mark.django_db
def test_the_sync_fixture(personal_agent: PersonalAgentClient) -> None:
    assert "We are open" in (personal_agent.send("What are your hours?").text or "")
