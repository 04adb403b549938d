"""Staff's private notes reach no channel that answers a personal agent beyond the
conversation endpoint: the Operations extension, the MCP server and feedback (the endpoint's
reads, long-polls, streams and exports: tests/wire/test_notes_private.py).

Atlas, the SDK's personal agent, signed in to acct-1, has a conversation in which the
Company Agent proposed an operation; staff then write a note and a transfer note in it.
Every answer Atlas gets afterwards, on every channel, is searched for both.
"""

from __future__ import annotations

import asyncio

import pytest
from django.db import connection
from personal_agent_protocol import FeedbackClient, FeedbackReport
from personal_agent_protocol.accounts import AccountTokenClient
from personal_agent_protocol.mcp import McpClient

from poppy_django import service
from poppy_django.operations.models import Operation
from tests.authority.sdk_agent import TENANT, World
from tests.desk.conftest import make_user
from tests.operations.test_mcp import URL as MCP_URL
from tests.operations.test_mcp import _context
from tests.operations.test_sdk_operations import _operations, _proposed_in_conversation

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]

NOTE = "NOTE-7d2e: refund at most 20, the customer was short with us"
HANDED = "TRANSFER-51c4: Pat knows the tent models"


def _staff_write_notes(operation_id: str) -> None:
    """Sam joins the conversation that proposed the operation, notes, hands it to Pat (in a
    thread of its own: its database connection is closed after)."""
    try:
        make_user(name="sam")
        make_user(name="pat")
        conversation_id = Operation.objects.get(operation_id=operation_id).conversation_id
        assert conversation_id
        service.human_joined(conversation_id, by="sam")
        service.add_note(conversation_id, NOTE, by="sam")
        service.transfer(conversation_id, "pat", by="sam", note=HANDED)
    finally:
        connection.close()


def test_no_operation_mcp_or_feedback_answer_carries_a_note(world: World, customers: None) -> None:
    user = "usr_notes_unseen_0000001"

    async def scenario() -> list[str]:
        await world.discover()
        session = await world.session(user)
        polled = await world.device_sign_in(user, session, "acct-1")
        proposed = await _proposed_in_conversation(world, user, polled.token)
        await asyncio.to_thread(_staff_write_notes, proposed.operation_id)
        answers = world.record_responses()

        # Operations: the proposal read back.
        operations, endpoint = _operations(world)
        await operations.read(
            endpoint, proposed.operation_id, token=polled.token, **world.who(user)
        )

        # MCP: every tool the server lists, called as the signed-in User.
        granted = await AccountTokenClient(
            reactor=world.reactor, http_client=world.http
        ).token_for_mcp(
            polled.account_token_reference,
            context=_context(world, user),
            session_id=session.session_id,
            resource=MCP_URL,
            dpop=True,
        )
        mcp = McpClient(
            http_client=world.http,
            token=granted.token,
            url=MCP_URL,
            reactor=world.reactor,
            who=world.who(user),
        )
        for tool in await mcp.list_tools():
            # Every tool here takes at most an order id: A-2, acct-1's processing order.
            required = tool["inputSchema"].get("required", [])
            assert set(required) <= {"order_id"}, tool
            await mcp.call_tool(tool["name"], {name: "A-2" for name in required})

        # Feedback: a report, and its answer.
        await FeedbackClient(transport=world.transport).report(
            world.company.document.feedback.endpoint,
            FeedbackReport(task="cancel an order", description="it asked a person"),
            token=polled.token,
            tenant_id=TENANT,
            pairwise_user_id=user,
            issuer=world.company.oauth_metadata.issuer,
        )
        return answers

    answers = asyncio.run(scenario())
    # What was searched: the operation, every tool's answer and the report's were recorded.
    assert len(answers) >= 7 and any("Cancel order A-2" in answer for answer in answers)
    for hidden in (NOTE, HANDED):
        assert not [answer for answer in answers if hidden in answer], hidden
