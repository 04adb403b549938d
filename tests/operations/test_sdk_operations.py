"""The SDK's own Operations client against the example project and its authority.

Atlas (an unmodified ``personal-agent-protocol`` personal agent listing ``operations`` v1)
signs in on Acme's device page, asks the Company Agent to cancel an order, gets an
operation in the reply, sees it revised by the company, and confirms the current revision
once; the order is cancelled once. The hostile cases go through the same client.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from personal_agent_protocol.operations import (
    OperationError,
    OperationsClient,
    approve,
    operation_from,
    operations_endpoint,
)

from example_project.shop.models import Order
from poppy_django.authority.models import Client
from poppy_django.models import ActionRecord, ActionStatus
from poppy_django.operations import service
from poppy_django.operations.models import Operation
from tests.authority.sdk_agent import ORIGIN, TENANT, World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]


def _operations(world: World) -> tuple[OperationsClient, str]:
    client_metadata = world.atlas.metadata
    endpoint = operations_endpoint(world.company.document, _parsed(client_metadata))
    assert endpoint == f"{ORIGIN}/poppy/operations"
    return OperationsClient(transport=world.transport), endpoint


def _parsed(metadata: dict[str, Any]) -> Any:
    from personal_agent_protocol.models import ClientMetadata

    return ClientMetadata.model_validate(metadata)


async def _signed_in(world: World, user: str, account: str = "acct-1") -> Any:
    session = await world.session(user)
    return (await world.device_sign_in(user, session, account)).token


async def _proposed_in_conversation(world: World, user: str, token: Any) -> Any:
    events = await world.talk(user, token, "please cancel A-2")
    proposals = [
        e.message for e in events if e.type == "message" and e.message.operation is not None
    ]
    assert len(proposals) == 1, events
    return operation_from(proposals[0])


def test_proposed_in_a_conversation_revised_then_confirmed_once(
    world: World, customers: None
) -> None:
    user = "usr_ops_owner_00000000001"

    async def scenario() -> tuple[Any, Any, Any, Any, list[Any]]:
        await world.discover()
        client, endpoint = _operations(world)
        token = await _signed_in(world, user)
        proposed = await _proposed_in_conversation(world, user, token)
        assert proposed.state == "proposed"
        before = await asyncio.to_thread(lambda: Order.objects.get(id="A-2").status)
        assert before == "processing"  # nothing is done before a confirmation

        await asyncio.to_thread(
            service.revise, proposed.operation_id, summary="Cancel order A-2 (refund in 5 days)"
        )
        stale = await client.confirm(
            endpoint, proposed, approval=approve(proposed), token=token, **world.who(user)
        )
        current = stale.operation
        done = await client.confirm(
            endpoint, current, approval=approve(current), token=token, **world.who(user)
        )
        again = await client.confirm(
            endpoint, current, approval=approve(current), token=token, **world.who(user)
        )
        read = await client.read(endpoint, proposed.operation_id, token=token, **world.who(user))
        events = await world.talk(user, token, "hello again")
        return stale, done, again, read, events

    stale, done, again, read, _ = asyncio.run(scenario())
    assert stale.status == "terms_changed"
    assert stale.operation.revision == 2
    assert stale.changed == ("summary",)
    assert done.status == "confirmed"
    assert done.operation.state == "succeeded"
    assert done.operation.confirmation.revision == 2
    assert done.operation.confirmation.approved_by == "user"
    assert done.operation.result.summary
    assert again.operation == done.operation  # confirming again changes nothing
    assert read == done.operation
    assert Order.objects.get(id="A-2").status == "cancelled"
    operation = Operation.objects.get()
    assert operation.attempts == 1  # performed once
    assert list(operation.revisions.values_list("revision", flat=True)) == [1, 2]
    record = ActionRecord.objects.get(tool="cancel_order")
    assert record.status == ActionStatus.SUCCEEDED  # the desk's action list follows it


def test_the_api_and_the_conversation_propose_the_same_operation(
    world: World, customers: None
) -> None:
    user = "usr_ops_cross_00000000001"

    async def scenario() -> tuple[Any, Any]:
        from personal_agent_protocol import ApiClient

        await world.discover()
        token = await _signed_in(world, user)
        answer = await ApiClient(transport=world.transport).call(
            "POST", f"{ORIGIN}/api/orders/A-2/cancel", token=token, body={}, **world.who(user)
        )
        in_conversation = await _proposed_in_conversation(world, user, token)
        return answer, in_conversation

    answer, in_conversation = asyncio.run(scenario())
    assert answer.status == 202
    assert answer.operation.operation_id == in_conversation.operation_id
    assert Order.objects.get(id="A-2").status == "processing"


def test_hostile_confirms_are_clear_errors_and_change_nothing(
    world: World, customers: None
) -> None:
    owner, stranger = "usr_ops_owner_00000000002", "usr_ops_stranger_00000001"

    async def scenario() -> dict[str, Any]:
        await world.discover()
        client, endpoint = _operations(world)
        token = await _signed_in(world, owner)
        proposed = await _proposed_in_conversation(world, owner, token)
        answers: dict[str, Any] = {}
        # Another User's operation: the same 404 as an unknown id.
        theirs = await _signed_in(world, stranger, account="acct-2")
        for name, operation_id in (
            ("foreign", proposed.operation_id),
            ("unknown", "op_unknown_000"),
        ):
            with pytest.raises(OperationError) as refused:
                await client.read(endpoint, operation_id, token=theirs, **world.who(stranger))
            answers[name] = (refused.value.code, refused.value.status_code)
        with pytest.raises(OperationError) as refused:
            await client.confirm(
                endpoint, proposed, approval=approve(proposed), token=theirs, **world.who(stranger)
            )
        answers["foreign_confirm"] = (refused.value.code, refused.value.status_code)
        # Expired: a late confirm returns the record as it is (expired); nothing performed.
        await asyncio.to_thread(
            Operation.objects.filter(pk=proposed.operation_id).update,
            expires_at=timezone.now() - timedelta(seconds=1),
        )
        answers["expired"] = await client.confirm(
            endpoint, proposed, approval=approve(proposed), token=token, **world.who(owner)
        )
        return answers

    answers = asyncio.run(scenario())
    assert answers["foreign"] == answers["unknown"] == ("operation_not_found", 404)
    assert answers["foreign_confirm"] == ("operation_not_found", 404)
    assert answers["expired"].status == "not_confirmed"
    assert answers["expired"].operation.state == "expired"
    assert Order.objects.get(id="A-2").status == "processing"
    assert Operation.objects.get().attempts == 0


def test_an_agent_without_the_extension_keeps_the_delegated_action(
    world: World, customers: None
) -> None:
    """Negotiation: Atlas's metadata no longer lists operations, so the scope approves."""
    user = "usr_ops_plain_00000000001"

    async def scenario() -> list[Any]:
        await world.discover()
        token = await _signed_in(world, user)
        metadata = await asyncio.to_thread(
            lambda: Client.objects.get(client_id=world.atlas.client_id).metadata
        )
        metadata.pop("extensions", None)
        await asyncio.to_thread(
            Client.objects.filter(client_id=world.atlas.client_id).update, metadata=metadata
        )
        return await world.talk(user, token, "cancel A-2")

    events = asyncio.run(scenario())
    replies = [e.message for e in events if e.type == "message" and e.message.role == "company"]
    assert replies[-1].operation is None
    assert replies[-1].data["actions"][0]["status"] == "succeeded"
    assert Order.objects.get(id="A-2").status == "cancelled"
    assert not Operation.objects.exists()


def test_poppy_json_announces_the_extension(world: World) -> None:
    company = asyncio.run(world.discover())
    extension = company.document.extensions["operations"]
    assert extension.version == "1"
    assert (extension.model_extra or {})["endpoint"] == f"{ORIGIN}/poppy/operations"
    assert TENANT  # the SDK's who() in these tests
