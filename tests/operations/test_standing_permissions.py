"""Standing permissions (Operations §4.3): a tool that opts in proposes operations the User
may have confirmed without being asked each time; every other one still needs the User.

Acme's ``send_receipt`` opts in (``@tool(standing_permission=True)``), so the orders API's
``POST /api/orders/<id>/receipt`` proposes ``user_approval_required: false``; the SDK's
``OperationsClient`` confirms it with ``approved_by: standing_permission`` when one of the
User's standing permissions covers the revision, and asks the User otherwise. Cancelling an
order does not opt in: a standing permission is refused there by the company too.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from personal_agent_protocol import ApiClient
from personal_agent_protocol.demo.sockets import served_over_tls
from personal_agent_protocol.operations import OperationError, OperationsClient, TermLimit
from personal_agent_protocol.operations import StandingPermission as Permission

from poppy_django.agent import ToolContext, tool
from poppy_django.operations import service
from poppy_django.operations.models import Operation
from poppy_django.verifier import Actor
from tests.authority.sdk_agent import DOMAIN, ORIGIN, World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]

ENDPOINT = f"{ORIGIN}/poppy/operations"
STANDING = (DOMAIN, "acct-1", "send_receipt")


def _grant(world: World, limits: tuple[TermLimit, ...], uses: int | None) -> None:
    """The User's standing permission, kept by their personal agent (never the company)."""
    store = world.host.standing
    store.permissions.clear()
    reference = f"perm_{secrets.token_hex(4)}"
    store.permissions[reference] = Permission(
        reference=reference,
        company=DOMAIN,
        account="acct-1",
        action="send_receipt",
        limits=limits,
        expires_at=datetime.now(UTC) + timedelta(hours=1),
        uses_remaining=uses,
    )


async def _propose(world: World, user: str, path: str) -> tuple[Any, Any]:
    session = await world.session(user)
    token = (await world.device_sign_in(user, session, "acct-1")).token
    answer = await ApiClient(transport=world.transport).call(
        "POST", f"{ORIGIN}{path}", token=token, body={}, **world.who(user)
    )
    assert answer.status == 202 and answer.operation is not None
    return token, answer.operation


def test_within_its_bounds_a_standing_permission_confirms(world: World, customers: None) -> None:
    user = "usr_standing_within_0001"
    _grant(world, (TermLimit("order_id", allowed=frozenset({"A-2"})),), uses=2)

    async def run() -> tuple[Any, Any]:
        async with served_over_tls(world.network):
            await world.discover()
            token, operation = await _propose(world, user, "/api/orders/A-2/receipt")
            outcome = await OperationsClient(transport=world.transport).confirm(
                ENDPOINT, operation, standing=STANDING, token=token, **world.who(user)
            )
            return operation, outcome

    operation, outcome = asyncio.run(run())
    assert operation.user_approval_required is False
    assert outcome.status == "confirmed"
    done = outcome.operation
    assert done.state == "succeeded" and done.confirmation.approved_by == "standing_permission"
    assert done.result.data["order_id"] == "A-2"
    assert Operation.objects.get(pk=operation.operation_id).attempts == 1


def test_out_of_bounds_the_user_is_asked_and_nothing_is_sent(world: World, customers: None) -> None:
    user = "usr_standing_outside_001"
    _grant(world, (TermLimit("order_id", allowed=frozenset({"A-1"})),), uses=None)

    async def run() -> tuple[Any, Any]:
        async with served_over_tls(world.network):
            await world.discover()
            token, operation = await _propose(world, user, "/api/orders/A-2/receipt")
            client = OperationsClient(transport=world.transport)
            with pytest.raises(OperationError) as refused:
                await client.confirm(
                    ENDPOINT, operation, standing=STANDING, token=token, **world.who(user)
                )
            read = await client.read(
                ENDPOINT, operation.operation_id, token=token, **world.who(user)
            )
            return refused.value.code, read

    code, read = asyncio.run(run())
    assert code == "no_standing_permission"
    assert read.state == "proposed" and read.confirmation is None


def test_one_use_left_and_two_racing_confirms_one_is_refused(world: World, customers: None) -> None:
    user = "usr_standing_race_000001"
    _grant(world, (TermLimit("order_id", allowed=frozenset({"A-2"})),), uses=1)

    async def run() -> tuple[list[Any], str]:
        async with served_over_tls(world.network):
            await world.discover()
            token, operation = await _propose(world, user, "/api/orders/A-2/receipt")
            client = OperationsClient(transport=world.transport)
            results = await asyncio.gather(
                *(
                    client.confirm(
                        ENDPOINT, operation, standing=STANDING, token=token, **world.who(user)
                    )
                    for _ in range(2)
                ),
                return_exceptions=True,
            )
            return list(results), operation.operation_id

    results, operation_id = asyncio.run(run())
    refused = [r for r in results if isinstance(r, OperationError)]
    assert [r.code for r in refused] == ["no_standing_permission"]
    assert Operation.objects.get(pk=operation_id).attempts == 1


def test_a_tool_that_does_not_opt_in_needs_the_user_even_from_a_hand_made_confirm(
    world: World, customers: None
) -> None:
    user = "usr_standing_cancel_0001"

    async def run() -> tuple[Any, Any]:
        async with served_over_tls(world.network):
            await world.discover()
            token, operation = await _propose(world, user, "/api/orders/A-2/cancel")
            url = f"{ENDPOINT}/{operation.operation_id}/confirm"
            answer = await world.transport.request(
                "POST",
                url,
                token=token,
                headers={"Content-Type": "application/json"},
                content=json.dumps(
                    {"revision": operation.revision, "approved_by": "standing_permission"}
                ).encode(),
                **world.who(user),
            )
            return operation, answer

    operation, answer = asyncio.run(run())
    assert operation.user_approval_required is True
    assert answer.status_code == 403 and answer.json()["error"] == "user_approval_required"
    assert Operation.objects.get(pk=operation.operation_id).state == "proposed"


def test_bounds_of_the_company_decide_per_call() -> None:
    """``standing_permission=bounds``: only calls within them skip the User's approval."""

    @tool(
        kind="action",
        roles=["scope:poppy:write"],
        operation=True,
        standing_permission=lambda arguments: arguments["amount"] <= 20,
    )
    def top_up(ctx: ToolContext, amount: int) -> dict[str, Any]:
        """Top up the account's balance."""
        return {"amount": amount}

    def proposed(amount: int) -> Operation:
        return service.propose(
            client_id="https://atlas.example",
            user_id="usr_standing_bounds_0001",
            account_id="acct-1",
            agent_name="support",
            tool=top_up,
            arguments={"amount": amount},
            actor=Actor("account:acct-1", "acct-1"),
            roles=frozenset({"scope:poppy:write"}),
        )

    assert proposed(15).user_approval_required is False
    assert proposed(50).user_approval_required is True
    with pytest.raises(ValueError, match="Only action tools"):
        tool(kind="read", standing_permission=True)
