"""The personal-agent gate, and a worker that lost its lease writing nothing."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from poppy_django.agent import CompanyAgent, ToolContext, register, tool
from poppy_django.agent.model_api import ModelTurn
from poppy_django.agent.registry import get as get_agent
from poppy_django.agent.runtime import TurnOutcome
from poppy_django.engine import transitions, turns
from poppy_django.models import Conversation, Event
from poppy_django.store import lifecycle
from tests.agents import PersonalAgent
from tests.turn_control import dispatch_lost
from tests.waiting import eventually

pytestmark = pytest.mark.django_db(transaction=True)


@tool(kind="read", roles=["staff"])
def internal_notes(ctx: ToolContext) -> dict[str, Any]:
    """Staff-only: never offered to a personal agent."""
    return {"summary": "secret notes"}


class RecordingModel:
    """Reports the tools it was offered, then tries the hidden one anyway."""

    offered: list[str] = []
    answer: Any = None

    def run(self, turn: ModelTurn, call_tool, emit_text) -> None:
        RecordingModel.offered = [t.name for t in turn.tools]
        RecordingModel.answer = call_tool("internal_notes", {})
        emit_text("done")


def test_tools_without_a_personal_agent_role_are_never_offered_nor_run(
    use_model, agent: PersonalAgent, settings, monkeypatch
):
    support = get_agent("support")
    register(CompanyAgent(name="support", tools=[*support.tools, internal_notes]))
    use_model(RecordingModel())
    try:
        conversation_id = agent.start("anything").json()["conversation_id"]
        agent.settled(conversation_id)
    finally:
        register(support)
    assert "internal_notes" not in RecordingModel.offered
    assert {"store_hours", "order_status"} <= set(RecordingModel.offered)
    assert RecordingModel.answer == {"error": "There is no tool named 'internal_notes'."}


def test_a_worker_whose_lease_was_taken_writes_nothing(agent: PersonalAgent):
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    with dispatch_lost():
        agent.send(conversation_id, "second")
    assert lifecycle.take_lease(conversation_id, "worker-a")
    slot = transitions.claim(conversation_id, "worker-a")
    assert isinstance(slot, transitions.TurnSlot)
    request = transitions.prepare(slot)
    # worker-a stalls past its lease; worker-b takes the conversation over.
    Conversation.objects.filter(pk=conversation_id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert lifecycle.take_lease(conversation_id, "worker-b")
    before = Event.objects.filter(conversation_id=conversation_id).count()
    with pytest.raises(turns.LeaseLost):
        transitions.commit(request, TurnOutcome(text="late reply"), "worker-a")
    assert Event.objects.filter(conversation_id=conversation_id).count() == before
    # worker-b answers the same messages, under the same stable reply id.
    again = transitions.claim(conversation_id, "worker-b")
    assert isinstance(again, transitions.TurnSlot) and again.message_id == request.message_id


class SlowModel:
    """Outlives the lease several times over, until released; only the heartbeat keeps it
    the writer."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def run(self, turn: ModelTurn, call_tool, emit_text) -> None:
        assert self.release.wait(20), "the test never released the slow turn"
        emit_text("finally")


def test_the_heartbeat_keeps_a_long_turn_the_only_writer(
    use_model, agent: PersonalAgent, settings, monkeypatch
):
    settings.POPPY = {**settings.POPPY, "LEASE_SECONDS": 0.5, "HEARTBEAT_SECONDS": 0.1}
    model = SlowModel()
    use_model(model)
    conversation_id = agent.start("take your time").json()["conversation_id"]

    def lease_expiry() -> datetime | None:
        conversation = Conversation.objects.get(pk=conversation_id)
        return conversation.lease_expires_at if conversation.lease_owner else None

    first = eventually(lease_expiry, what="the turn to hold the lease")
    # Past the first lease's expiry, renewed: only the heartbeat has kept it.
    eventually(
        lambda: (expiry := lease_expiry()) is not None and expiry > first + timedelta(seconds=1),
        what="the lease renewed past its first expiry",
    )
    assert not lifecycle.take_lease(conversation_id, "intruder")
    model.release.set()
    events = agent.settled(conversation_id)
    assert [e["message"]["text"] for e in events if e["type"] == "message"] == [
        "take your time",
        "finally",
    ]
