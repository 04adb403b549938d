"""The website's page of an operation: the User confirms the exact revision in the agent's
browser (Operations §4.4), over TLS with the SDK's own clients.

Atlas signs in (Mediated Sign-In), the orders API proposes cancelling A-2 (its ``url`` is
``/operations/<id>``), the agent's browser joins the Session at that page and presses
Confirm: the operation is confirmed once (``approved_by: user``), and a confirm at the
endpoint or the page again changes nothing. A stale revision, a forged form (no CSRF
token), another Session's browser and a browser after sign-out are refused, nothing done.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from personal_agent_protocol import ApiClient
from personal_agent_protocol.demo.sockets import served_over_tls
from personal_agent_protocol.operations import OperationsClient, approve, operation_page

from example_project.shop.models import Order
from poppy_django.operations import service
from poppy_django.operations.models import Operation
from poppy_django.threads import in_thread
from tests.authority.channels import ChannelAgent
from tests.authority.driver import PASSWORD
from tests.authority.sdk_agent import DOMAIN, ORIGIN, TENANT, World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]

ENDPOINT = f"{ORIGIN}/poppy/operations"


def over_tls(world: World, scenario: Callable[[], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        async with served_over_tls(world.network):
            await world.discover()
            return await scenario()

    return asyncio.run(run())


def _who(user: str) -> dict[str, str]:
    return {"tenant_id": TENANT, "pairwise_user_id": user, "issuer": ORIGIN}


async def _signed_in_with_a_proposal(agent: ChannelAgent, user: str, account: str) -> Any:
    session = await agent.session(user)
    signed = await agent.sign_in(
        user, session, {"username": account, "password": PASSWORD}, ("poppy:read", "poppy:write")
    )
    assert signed.status == "complete", signed
    answer = await ApiClient(transport=agent.transport).call(
        "POST", f"{ORIGIN}/api/orders/A-2/cancel", token=signed.token, body={}, **_who(user)
    )
    assert answer.status == 202 and answer.operation is not None
    return signed, answer.operation


def test_the_user_confirms_the_exact_revision_on_the_page_once(
    world: World, customers: None
) -> None:
    agent = ChannelAgent(world)
    user = "usr_op_page_owner_00001"

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        signed, operation = await _signed_in_with_a_proposal(agent, user, "acct-1")
        page = operation_page(operation, DOMAIN)
        seen["page_url"] = page
        seen["shown"] = await agent.join(user, signed.token.session_id, page)
        seen["confirmed"] = await agent.browser.submit(
            page, {"action": "confirm", "revision": str(operation.revision)}
        )
        # The same form posted again (a double click, a replayed request): nothing more.
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', seen["shown"].text)
        assert csrf is not None
        seen["again"] = await agent.browser.http.post(
            page,
            data={"csrfmiddlewaretoken": csrf[1], "action": "confirm", "revision": "1"},
            headers={"Origin": ORIGIN},
        )
        client = OperationsClient(transport=agent.transport)
        seen["read"] = await client.read(
            ENDPOINT, operation.operation_id, token=signed.token, **_who(user)
        )
        seen["endpoint"] = await client.confirm(
            ENDPOINT, operation, approval=approve(operation), token=signed.token, **_who(user)
        )
        seen["operation"] = operation
        return seen

    seen = over_tls(world, scenario)
    operation = seen["operation"]
    assert seen["page_url"] == f"{ORIGIN}/operations/{operation.operation_id}"
    shown = seen["shown"]
    assert shown.status_code == 200 and "Cancel order A-2" in shown.text
    # Joined signed in (the account's user logged in): no cookie of the handoff outlives it.
    handoff = shown.history[0]
    assert handoff.status_code == 303
    assert "max-age" not in handoff.headers.get("set-cookie", "").lower()
    assert 'name="revision" value="1"' in shown.text
    assert shown.headers["cache-control"] == "no-store"
    confirmed = seen["confirmed"]
    assert confirmed.history[0].status_code == 303 and confirmed.status_code == 200
    assert "Confirm</button>" not in confirmed.text  # no form once confirmed
    read = seen["read"]
    assert read.state == "succeeded"
    assert read.confirmation is not None and read.confirmation.approved_by == "user"
    assert read.confirmation.revision == 1
    assert seen["again"].status_code == 303
    assert seen["endpoint"].operation == read  # confirming at the endpoint changes nothing
    assert Order.objects.get(id="A-2").status == "cancelled"
    assert Operation.objects.get(pk=operation.operation_id).attempts == 1


def test_a_stale_revision_or_a_forged_form_changes_nothing(world: World, customers: None) -> None:
    agent = ChannelAgent(world)
    user = "usr_op_page_stale_00001"

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        signed, operation = await _signed_in_with_a_proposal(agent, user, "acct-1")
        page = operation_page(operation, DOMAIN)
        shown = await agent.join(user, signed.token.session_id, page)
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', shown.text)
        assert csrf is not None
        # The company revises it after the page was shown: the page's revision is stale.
        await in_thread(service.revise, operation.operation_id, summary="Cancel A-2 now")
        seen["stale"] = await agent.browser.submit(page, {"action": "confirm", "revision": "1"})
        # A form without the page's CSRF token (another site's, or a script's).
        seen["forged"] = await agent.browser.http.post(
            page,
            data={"action": "confirm", "revision": "2"},
            headers={"Origin": "https://evil.example"},
        )
        seen["garbage"] = await agent.browser.submit(
            page, {"action": "confirm", "revision": "2; drop"}
        )
        seen["state"] = await in_thread(Operation.objects.get, pk=operation.operation_id)
        return seen

    seen = over_tls(world, scenario)
    stale = seen["stale"]
    assert stale.status_code == 409, stale.text
    assert "changed since it was shown" in stale.text and "Cancel A-2 now" in stale.text
    assert 'name="revision" value="2"' in stale.text  # the current revision, to review
    assert seen["forged"].status_code == 403
    assert seen["garbage"].status_code == 400
    current = seen["state"]
    assert current.state == "proposed" and current.confirmed_at is None
    assert Order.objects.get(id="A-2").status == "processing"


def test_only_the_sessions_browser_sees_the_page_and_not_after_sign_out(
    world: World, customers: None
) -> None:
    owner, stranger = ChannelAgent(world), ChannelAgent(world)
    user, other = "usr_op_page_owner_00002", "usr_op_page_other_00002"

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        signed, operation = await _signed_in_with_a_proposal(owner, user, "acct-1")
        page = operation_page(operation, DOMAIN)
        theirs = await stranger.session(other)
        seen["stranger"] = await stranger.join(other, theirs.session_id, page)
        seen["no_session"] = await world.network.client().get(page)
        seen["owner"] = await owner.join(user, signed.token.session_id, page)
        await owner.sign_out(user, signed.account_token_reference)
        seen["after_sign_out"] = await owner.browser.get(page)
        seen["unknown"] = await stranger.browser.get(f"{ORIGIN}/operations/op_unknown_000000")
        return seen

    seen = over_tls(world, scenario)
    assert seen["stranger"].status_code == 404 and "Cancel order" not in seen["stranger"].text
    assert seen["no_session"].status_code == 401
    assert seen["owner"].status_code == 200
    assert seen["after_sign_out"].status_code in (401, 403)
    assert "Cancel order" not in seen["after_sign_out"].text
    assert seen["unknown"].status_code == 404
