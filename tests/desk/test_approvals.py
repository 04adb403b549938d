"""Actions that need a person: pending in the turn, decided at the desk, told to the agent."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from example_project.shop import agent as shop
from example_project.shop.models import Order
from poppy_django import service
from poppy_django.agent import CompanyAgent, ToolContext, register, tool
from poppy_django.desk import decisions
from poppy_django.errors import PoppyError
from poppy_django.models import ActionRecord, ActionStatus, AgentThread, Event
from tests.agents import PersonalAgent, messages
from tests.desk.conftest import desk_url, make_user, new_request_id

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]

AGENT = "desk-approvals"
#: (actor id, account id, roles) of every run of the tool below.
runs: list[tuple[str, str | None, frozenset[str]]] = []


@tool(
    name="cancel_order",
    kind="action",
    roles=["scope:poppy:write"],
    summary="Cancel order {order_id}",
    needs_approval=True,
)
def cancel_order_with_approval(ctx: ToolContext, order_id: str) -> dict[str, Any]:
    """The example's cancel_order, behind a person's approval."""
    runs.append((ctx.actor.id, ctx.account_id, ctx.roles))
    return shop.cancel_order.function(ctx, order_id=order_id)


@pytest.fixture(autouse=True)
def approval_agent(settings) -> None:
    """A test-only Company Agent whose cancel_order needs approval (the scripted model calls it)."""
    register(CompanyAgent(name=AGENT, tools=[cancel_order_with_approval]))
    settings.POPPY = {**settings.POPPY, "AGENT": AGENT}
    Order.objects.update_or_create(
        id="A-1", defaults={"account_id": "acct-1", "item": "Tent", "status": "shipped"}
    )
    Order.objects.update_or_create(
        id="A-2", defaults={"account_id": "acct-1", "item": "Stove", "status": "processing"}
    )
    runs.clear()


def proposed(acct1: PersonalAgent, order_id: str = "A-2") -> tuple[str, ActionRecord]:
    conversation_id = acct1.start(f"please cancel {order_id}").json()["conversation_id"]
    events = acct1.settled(conversation_id)
    (record,) = ActionRecord.objects.filter(conversation_id=conversation_id)
    assert record.status == ActionStatus.AWAITING_APPROVAL
    # The turn says so in words, and nothing is on data.actions until it is decided.
    reply = messages(events)[-1]
    assert reply["text"] == f"Cancel order {order_id}: waiting for approval by our staff."
    assert "actions" not in (reply.get("data") or {})
    assert runs == []
    return conversation_id, record


def told(acct1: PersonalAgent, conversation_id: str) -> dict[str, Any]:
    """The company message telling a decision's outcome, once a worker posted it."""
    events = acct1.events_until(
        conversation_id,
        lambda evs: any((m.get("data") or {}).get("actions") for m in messages(evs)),
    )
    return next(m for m in messages(events) if (m.get("data") or {}).get("actions"))


def test_approve_runs_under_the_recorded_actor_and_roles(acct1: PersonalAgent) -> None:
    conversation_id, record = proposed(acct1)
    assert record.actor_id == "acct-1" and "scope:poppy:write" in record.roles
    approved = decisions.approve(record.pk, by="sam", request_id="req-approve-1")
    # The web side only records the decision; a worker runs the action.
    assert approved.status == ActionStatus.APPROVED
    told(acct1, conversation_id)
    decided = ActionRecord.objects.get(pk=record.pk)
    assert decided.status == ActionStatus.SUCCEEDED and decided.decided_by == "sam"
    assert runs == [("acct-1", "acct-1", frozenset(record.roles))]
    assert Order.objects.get(pk="A-2").status == "cancelled"
    # The outcome is a company message carrying data.actions, worded like a turn's.
    raw = acct1.read(conversation_id).content.decode()
    outcome = messages(json.loads(raw)["events"])[-1]
    assert outcome["role"] == "company" and outcome["sender"] == "agent"
    assert outcome["text"] == "Done: Cancel order A-2."
    assert outcome["data"]["actions"] == [decided.to_wire()]
    assert outcome["data"]["actions"][0]["status"] == "succeeded"
    assert "req-approve-1" not in raw and "sam" not in raw
    event = Event.objects.get(conversation_id=conversation_id, meta__request_id="req-approve-1")
    assert event.meta["by"] == "sam"
    # The Company Agent's thread learns the decision, for its later turns.
    thread = AgentThread.objects.get(conversation_id=conversation_id, actor_id="acct-1")
    assert thread.history[-1] == {"role": "assistant", "text": "Done: Cancel order A-2."}


@pytest.mark.parametrize("decide", ["approve", "reject"])
def test_while_a_person_holds_it_the_outcome_is_not_the_company_agents(
    acct1: PersonalAgent, decide: str
) -> None:
    """A person joined before deciding: the agent does not speak while they hold it."""
    make_user(name="sam")
    conversation_id, record = proposed(acct1)
    service.human_joined(conversation_id, by="sam")
    getattr(decisions, decide)(record.pk, by="sam")
    outcome = told(acct1, conversation_id)
    assert outcome["role"] == "company" and outcome["sender"] == "human"
    assert outcome["data"]["actions"][0]["status"] == (
        "succeeded" if decide == "approve" else "rejected"
    )
    assert service.get(conversation_id).responder == "human"  # still theirs


def test_a_failing_action_is_told_as_failed(acct1: PersonalAgent) -> None:
    conversation_id, record = proposed(acct1, "A-1")  # shipped: cannot be cancelled
    decisions.approve(record.pk, by="sam")
    outcome = told(acct1, conversation_id)
    assert ActionRecord.objects.get(pk=record.pk).status == ActionStatus.FAILED
    assert outcome["text"] == "Could not cancel order A-1: order A-1 is shipped."
    assert outcome["data"]["actions"][0]["status"] == "failed"


def test_reject_never_runs_it(acct1: PersonalAgent) -> None:
    conversation_id, record = proposed(acct1)
    decided = decisions.reject(record.pk, by="sam", request_id="req-reject-1")
    assert decided.status == ActionStatus.REJECTED and runs == []
    assert Order.objects.get(pk="A-2").status == "processing"
    outcome = messages(acct1.read(conversation_id).json()["events"])[-1]
    assert outcome["text"] == "Not done: Cancel order A-2 was declined."
    assert outcome["data"]["actions"] == [
        {"tool": "cancel_order", "status": "rejected", "summary": "Cancel order A-2"}
    ]


def test_an_action_is_decided_once(acct1: PersonalAgent) -> None:
    conversation_id, record = proposed(acct1)
    decisions.approve(record.pk, by="sam")
    told(acct1, conversation_id)
    for decide in (decisions.approve, decisions.reject):
        with pytest.raises(PoppyError) as refused:
            decide(record.pk, by="kim")
        assert refused.value.code == "action_decided" and refused.value.status == 409
    assert len(runs) == 1
    outcomes = [
        m for m in messages(acct1.read(conversation_id).json()["events"]) if m["role"] == "company"
    ]
    assert sum(1 for m in outcomes if (m.get("data") or {}).get("actions")) == 1


def test_closed_conversations_can_only_reject(acct1: PersonalAgent) -> None:
    conversation_id, record = proposed(acct1)
    acct1.post(f"/{conversation_id}/close", {})
    with pytest.raises(PoppyError) as refused:
        decisions.approve(record.pk, by="sam")
    assert refused.value.code == "conversation_closed" and runs == []
    last_seq = Event.objects.filter(conversation_id=conversation_id).count()
    assert decisions.reject(record.pk, by="sam").status == ActionStatus.REJECTED
    assert Event.objects.filter(conversation_id=conversation_id).count() == last_seq


def test_the_desk_shows_and_decides_approvals(desk: Client, acct1: PersonalAgent) -> None:
    conversation_id, record = proposed(acct1)
    page = desk.get(desk_url(conversation_id)).content.decode()
    assert "Cancel order A-2" in page and f'data-record="{record.pk}"' in page
    assert decisions.awaiting(conversation_id).get() == record
    queue = desk.get("/admin/poppy_django/conversation/desk/?status=approvals").content.decode()
    assert conversation_id in queue
    request_id = new_request_id()
    response = desk.post(
        desk_url(conversation_id, f"approvals/{record.pk}/approve/"),
        data=json.dumps({"request_id": request_id}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["request_id"] == request_id
    # The outcome is posted by a worker, carrying the decision's request id.
    told(acct1, conversation_id)
    event = Event.objects.get(conversation_id=conversation_id, meta__request_id=request_id)
    assert event.payload["message"]["data"]["actions"][0]["status"] == "succeeded"
    replayed = desk.post(
        desk_url(conversation_id, f"approvals/{record.pk}/approve/"),
        data=json.dumps({"request_id": request_id}),
        content_type="application/json",
    )
    assert replayed.status_code == 200 and replayed.json()["replayed"] is True
    assert replayed.json()["events"] == [event.seq]
    record.refresh_from_db()
    assert record.status == ActionStatus.SUCCEEDED and record.decided_by == "sam"
    again = desk.post(
        desk_url(conversation_id, f"approvals/{record.pk}/reject/"),
        data=json.dumps({"request_id": new_request_id()}),
        content_type="application/json",
    )
    assert again.status_code == 409 and again.json()["error"] == "action_decided"
    transcript = desk.get(desk_url(conversation_id, "events.json")).json()
    assert "No action is waiting for approval" in transcript["approvals_html"]
    assert "Action cancel_order: succeeded" in transcript["events"][-1]["html"]
    other = desk.post(
        desk_url("cnv_other", f"approvals/{record.pk}/approve/"),
        data=json.dumps({"request_id": new_request_id()}),
        content_type="application/json",
    )
    assert other.status_code == 404
