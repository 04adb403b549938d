"""The SDK's MCP client against the example project's MCP server, over TLS.

Atlas finds the server in ``poppy.json``'s ``apis``, reads its RFC 9728 metadata, gets a
Session Token for its ``resource`` from Acme's authority (signed in, through its Account
Token), lists the tools and calls them: a read gated by ``poppy:read``, refused signed
out; a consequential tool answers with an Operation (the one the orders API proposes)
instead of acting. Tokens are good only where they were issued for.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from personal_agent_protocol import ApiClient, SessionClient
from personal_agent_protocol.accounts import AccountTokenClient, AccountTokenContext
from personal_agent_protocol.demo.sockets import served_over_tls
from personal_agent_protocol.mcp import McpClient, McpError, fetch_mcp_server_metadata, mcp_api

from example_project.shop.models import Order
from tests.authority.sdk_agent import ORIGIN, TENANT, World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]

URL = f"{ORIGIN}/poppy/mcp"


def _context(world: World, user: str) -> AccountTokenContext:
    metadata = world.company.oauth_metadata
    return AccountTokenContext(
        token_endpoint=metadata.token_endpoint,
        issuer=metadata.issuer,
        client_id=world.atlas.client_id,
        tenant_id=TENANT,
        pairwise_user_id=user,
        revocation_endpoint=metadata.revocation_endpoint,
    )


def test_tools_over_mcp_gated_by_scope_and_consequential_ones_propose(
    world: World, customers: None
) -> None:
    user, stranger = "usr_mcp_owner_000000001", "usr_mcp_stranger_000001"

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with served_over_tls(world.network):
            await world.discover()
            api = mcp_api(world.company.document)
            assert api is not None and api.url == URL
            metadata = world.company.oauth_metadata
            served = await fetch_mcp_server_metadata(world.http, URL, issuer=metadata.issuer)
            seen["dpop"] = served.supports_dpop
            session = await world.session(user)
            polled = await world.device_sign_in(user, session, "acct-1")
            result = await AccountTokenClient(
                reactor=world.reactor, http_client=world.http
            ).token_for_mcp(
                polled.account_token_reference,
                context=_context(world, user),
                session_id=session.session_id,
                resource=URL,
                dpop=True,
            )
            token = result.token
            client = McpClient(
                http_client=world.http,
                token=token,
                url=URL,
                reactor=world.reactor,
                who=world.who(user),
            )
            seen["tools"] = {tool["name"] for tool in await client.list_tools()}
            seen["orders"] = await client.call_tool("list_orders")
            seen["proposed"] = await client.call_tool("cancel_order", {"order_id": "A-2"})
            through_api = await ApiClient(transport=world.transport).call(
                "POST",
                f"{ORIGIN}/api/orders/A-2/cancel",
                token=polled.token,
                body={},
                **world.who(user),
            )
            seen["api_operation"] = through_api.operation
            # The MCP token works nowhere else; the conversation token not at MCP.
            with pytest.raises(Exception) as elsewhere:
                await ApiClient(transport=world.transport).call(
                    "GET", f"{ORIGIN}/api/orders", token=token, **world.who(user)
                )
            seen["elsewhere"] = getattr(elsewhere.value, "status_code", None)
            at_mcp = McpClient(
                http_client=world.http,
                token=polled.token,
                url=URL,
                reactor=world.reactor,
                who=world.who(user),
            )
            with pytest.raises(McpError) as refused:
                await at_mcp.list_tools()
            seen["conversation_token"] = (refused.value.code, refused.value.status_code)
            # Signed out: the scope-gated read is refused with sign_in_required.
            other = await world.session(stranger)
            signed_out = await SessionClient(
                reactor=world.reactor, http_client=world.http
            ).token_for_mcp(
                client_id=world.atlas.client_id,
                pairwise_user_id=stranger,
                issuer=metadata.issuer,
                token_endpoint=metadata.token_endpoint,
                tenant_id=TENANT,
                session_id=other.session_id,
                resource=URL,
                dpop=True,
            )
            outsider = McpClient(
                http_client=world.http,
                token=signed_out,
                url=URL,
                reactor=world.reactor,
                who=world.who(stranger),
            )
            seen["hours"] = await outsider.call_tool("store_hours")
            with pytest.raises(McpError) as refused:
                await outsider.call_tool("list_orders")
            seen["signed_out"] = (refused.value.code, refused.value.status_code)
        return seen

    seen = asyncio.run(scenario())
    assert seen["dpop"] is True
    assert {"store_hours", "list_orders", "cancel_order", "order_status"} <= seen["tools"]
    orders = seen["orders"]
    assert not orders.is_error
    assert {o["id"] for o in orders.structured_content["orders"]} == {"A-1", "A-2"}
    proposed = seen["proposed"]
    assert proposed.operation is not None and proposed.operation.state == "proposed"
    assert proposed.operation.operation_id == seen["api_operation"].operation_id
    assert Order.objects.get(id="A-2").status == "processing"  # proposed, not done
    assert seen["elsewhere"] == 401
    assert seen["conversation_token"] == ("invalid_token", 401)
    assert not seen["hours"].is_error
    assert seen["signed_out"] == ("sign_in_required", 403)


def test_the_sdk_gets_a_bearer_token_from_a_bearer_server_and_calls_tools_with_it(
    world: World, customers: None, acme_settings: Any
) -> None:
    """An MCP server without DPoP (``POPPY["MCP"]["DPOP"]`` False, §4.3): its metadata
    says so, the SDK's Account Token request carries no proof, ``token_type`` is Bearer,
    and the signed-in read works."""
    acme_settings.POPPY = {**acme_settings.POPPY, "MCP": {"ENABLED": True, "DPOP": False}}
    user = "usr_mcp_bearer_00000001"

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with served_over_tls(world.network):
            await world.discover()
            metadata = world.company.oauth_metadata
            served = await fetch_mcp_server_metadata(world.http, URL, issuer=metadata.issuer)
            seen["dpop"] = served.supports_dpop
            session = await world.session(user)
            polled = await world.device_sign_in(user, session, "acct-1")
            result = await AccountTokenClient(
                reactor=world.reactor, http_client=world.http
            ).token_for_mcp(
                polled.account_token_reference,
                context=_context(world, user),
                session_id=session.session_id,
                resource=URL,
                dpop=served.supports_dpop,
            )
            token = result.token
            assert token is not None
            seen["type"] = token.token_type
            client = McpClient(http_client=world.http, token=token, url=URL, reactor=world.reactor)
            seen["orders"] = await client.call_tool("list_orders")
        return seen

    seen = asyncio.run(scenario())
    assert seen["dpop"] is False
    assert seen["type"] == "Bearer"
    assert {o["id"] for o in seen["orders"].structured_content["orders"]} == {"A-1", "A-2"}
    # Refused everywhere else: tests/operations/test_mcp_hostile.py (the SDK never sends it).
