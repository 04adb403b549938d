"""An operation whose outcome is unknown (Operations §5): it stays ``in_progress``, with
``Retry-After``, is never performed again and never reads as failed; cancelling changes
nothing; the company settles it later and the outcome is told like any other.

Acme's ``refund_order`` hands the refund to a provider that answers later (it raises
``OutcomeUnknown``); ``POST /api/orders/<id>/refund`` proposes it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from personal_agent_protocol import ApiClient
from personal_agent_protocol.demo.sockets import served_over_tls
from personal_agent_protocol.operations import OperationsClient, approve

from poppy_django.errors import PoppyError
from poppy_django.operations import perform, service
from poppy_django.operations.models import Operation
from tests.authority.sdk_agent import ORIGIN, World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]

ENDPOINT = f"{ORIGIN}/poppy/operations"


def test_an_unknown_outcome_stays_in_progress_until_the_company_settles_it(
    world: World, customers: None
) -> None:
    user = "usr_unknown_outcome_0001"

    async def confirmed() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with served_over_tls(world.network):
            await world.discover()
            session = await world.session(user)
            token = (await world.device_sign_in(user, session, "acct-1")).token
            answer = await ApiClient(transport=world.transport).call(
                "POST", f"{ORIGIN}/api/orders/A-2/refund", token=token, body={}, **world.who(user)
            )
            operation = answer.operation
            client = OperationsClient(transport=world.transport)
            seen["confirm"] = await client.confirm(
                ENDPOINT, operation, approval=approve(operation), token=token, **world.who(user)
            )
            url = f"{ENDPOINT}/{operation.operation_id}"
            seen["read"] = await world.transport.request("GET", url, token=token, **world.who(user))
            seen["cancel"] = await client.cancel(
                ENDPOINT, operation.operation_id, token=token, **world.who(user)
            )
            seen["id"] = operation.operation_id
            seen["token"] = token
        return seen

    seen = asyncio.run(confirmed())
    outcome = seen["confirm"]
    assert outcome.operation.state == "in_progress" and outcome.retry_after is not None
    assert seen["read"].status_code == 200 and seen["read"].json()["state"] == "in_progress"
    assert "retry-after" in seen["read"].headers
    assert seen["cancel"].state == "in_progress"  # cancelling leaves it until known
    operation_id = seen["id"]
    # Never performed again: recovery leaves it alone, a worker's retry does nothing.
    assert operation_id not in perform.orphaned(grace_seconds=0)
    assert perform.perform(operation_id) is False
    assert Operation.objects.get(pk=operation_id).attempts == 1

    settled = service.settle(operation_id, succeeded=True, summary="Refunded 42.00 EUR.")
    assert settled.state == "succeeded" and settled.to_wire()["result"]["summary"] == (
        "Refunded 42.00 EUR."
    )
    with pytest.raises(PoppyError) as again:
        service.settle(operation_id, succeeded=False, summary="changed my mind")
    assert again.value.code == "operation_not_unknown" and again.value.status == 409
    assert Operation.objects.get(pk=operation_id).state == "succeeded"
