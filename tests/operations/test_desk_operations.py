"""Operations on the desk: the conversation's action log shows them with the other actions.

The personal agent (the fake verifier's, whose stored client metadata lists operations v1)
asks to cancel an order; the desk shows the proposed operation, then — once the agent
confirmed it at the operations endpoint and a worker performed it — its outcome.
"""

from __future__ import annotations

import pytest
from django.test import Client

from example_project.shop.models import Order
from poppy_django.authority.models import Client as AgentClient
from poppy_django.models import ActionRecord, ActionStatus
from tests.agents import PersonalAgent, messages
from tests.desk.conftest import desk_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]


@pytest.fixture(autouse=True)
def _lists_operations(acct1: PersonalAgent) -> None:
    AgentClient.objects.create(
        client_id=acct1.client_id,
        metadata={"client_id": acct1.client_id, "extensions": {"operations": {"version": "1"}}},
    )


def test_the_desk_shows_an_operation_from_proposal_to_outcome(
    desk: Client, acct1: PersonalAgent
) -> None:
    conversation_id = acct1.start("please cancel A-2").json()["conversation_id"]
    reply = messages(acct1.settled(conversation_id))[-1]
    operation = reply["operation"]
    assert reply["data"]["operation"] == operation
    assert reply["text"] == "Cancel order A-2: please confirm it, and I will do it."
    record = ActionRecord.objects.get(conversation_id=conversation_id)
    assert record.status == ActionStatus.PROPOSED
    page = desk.get(desk_url(conversation_id)).content.decode()
    assert f'data-operation="{operation["operation_id"]}"' in page
    assert "revision 1: proposed" in page
    assert Order.objects.get(id="A-2").status == "processing"

    confirmed = Client().post(
        f"/poppy/operations/{operation['operation_id']}/confirm",
        data='{"revision": 1, "approved_by": "user"}',
        content_type="application/json",
        **acct1.headers(),
    )
    assert confirmed.status_code == 200, confirmed.content
    assert confirmed.json()["state"] == "succeeded"
    told = acct1.events_until(
        conversation_id, lambda evs: any("actions" in (m.get("data") or {}) for m in messages(evs))
    )
    outcome = next(m for m in messages(told) if "actions" in (m.get("data") or {}))
    assert outcome["data"]["actions"][0]["status"] == "succeeded"
    assert outcome["operation"]["state"] == "succeeded"
    record.refresh_from_db()
    assert record.status == ActionStatus.SUCCEEDED
    page = desk.get(desk_url(conversation_id)).content.decode()
    assert "revision 1: succeeded" in page
    assert Order.objects.get(id="A-2").status == "cancelled"
