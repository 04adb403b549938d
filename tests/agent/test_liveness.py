"""Never stuck: a hung model, a failure anywhere in a turn, one turn per agent thread, and the
delta rule (pieces always belong to a message that is written), through the endpoint.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from example_project.shop import agent as shop
from poppy_django.agent import CompanyAgent, ToolContext, register, tool
from poppy_django.agent.model_api import ModelTurn
from poppy_django.agent.scripted import ScriptedModel
from poppy_django.conf import DEFAULT_TEXTS
from poppy_django.desk import decisions
from poppy_django.fanout.listening import waiting_readers
from poppy_django.models import ActionRecord, ActionStatus, Conversation, Status
from tests.agents import PersonalAgent, messages
from tests.stream.asgi import get
from tests.waiting import eventually

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]

FAILED = DEFAULT_TEXTS["failed_turn"]


def company(events: list[dict]) -> list[dict]:
    return [m for m in messages(events) if m["role"] == "company"]


def stream_until_idle(pa: PersonalAgent, conversation_id: str) -> list[Any]:
    """SSE frames of the conversation until its last state event says idle."""

    def idle(body: bytes) -> bool:
        return body.rstrip().endswith(b'"status":"idle","responder":"agent"}')

    response = get(
        f"/poppy/conversations/{conversation_id}/events",
        {"authorization": pa.headers()["HTTP_AUTHORIZATION"], "accept": "text/event-stream"},
        hang_up=idle,
        timeout=30,
    )
    return response.frames


def stream_is_open() -> None:
    """Wait (bounded) until the test's stream listens: its first frames then show what the
    model says next, however slowly the stream's request started."""
    eventually(lambda: bool(waiting_readers()), what="the test's stream to listen")


# -- a hung model ------------------------------------------------------------------------


class HungModel:
    """Says a little, then hangs until released; then tries to say and do more."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.after: list[str] = []

    def run(self, turn: ModelTurn, call_tool, emit_text) -> None:
        stream_is_open()
        emit_text("Let me ")
        self.release.wait(30)
        for late in (lambda: emit_text("late words"), lambda: call_tool("cancel_order", {})):
            try:
                late()
                self.after.append("done")
            except Exception as exc:
                self.after.append(type(exc).__name__)


def test_a_hung_model_is_abandoned_at_the_time_limit(
    use_model, acct1: PersonalAgent, settings, monkeypatch
):
    settings.POPPY = {**settings.POPPY, "TURN_TIMEOUT_SECONDS": 1.0}
    hung = HungModel()
    use_model(hung)
    conversation_id = acct1.start("hello?").json()["conversation_id"]
    try:
        frames = stream_until_idle(acct1, conversation_id)
    finally:
        hung.release.set()
    deltas = [f.json() for f in frames if f.event == "text-delta"]
    (reply,) = company([f.json() for f in frames if f.event == "message"])
    assert reply["text"] == FAILED
    # The piece streamed before the limit belongs to the failed-turn message.
    assert deltas == [{"message_id": reply["id"], "text": "Let me "}]
    # What the abandoned run tries afterwards is refused: no piece, no tool, no write.
    eventually(lambda: len(hung.after) >= 2, what="the abandoned run's two attempts")
    assert hung.after == ["TurnAbandoned", "TurnAbandoned"]
    assert not ActionRecord.objects.filter(conversation_id=conversation_id).exists()
    assert Conversation.objects.get(pk=conversation_id).status == Status.IDLE
    # The conversation goes on.
    use_model(ScriptedModel())
    acct1.send(conversation_id, "still there?")
    assert company(acct1.settled(conversation_id))[-1]["text"] == "You said: still there?"


# -- a failure anywhere in a turn --------------------------------------------------------


def broken_actor_for(principal: Any, default: Any) -> Any:
    raise RuntimeError("the ACTOR_FOR hook is broken")


def broken_formatter(action: dict[str, Any], texts: dict[str, str]) -> str:
    raise RuntimeError("the ACTION_FORMATTER is broken")


@tool(kind="read", roles=["personal_agent"])
def store_hours(ctx: ToolContext) -> dict[str, Any]:
    """A tool whose backend is down."""
    raise ConnectionError("the hours service is down")


def _actor_for(settings, monkeypatch) -> None:
    settings.POPPY = {**settings.POPPY, "ACTOR_FOR": f"{__name__}.broken_actor_for"}


def _unknown_agent(settings, monkeypatch) -> None:
    settings.POPPY = {**settings.POPPY, "AGENT": "no-such-agent"}


def _model_construction(settings, monkeypatch) -> None:
    settings.POPPY = {**settings.POPPY, "MODELS": {"support": "no-such-provider:model"}}


def _tool(settings, monkeypatch) -> None:
    register(CompanyAgent(name="broken-tools", tools=[store_hours]))
    settings.POPPY = {**settings.POPPY, "AGENT": "broken-tools"}


def _action_formatter(settings, monkeypatch) -> None:
    settings.POPPY = {**settings.POPPY, "ACTION_FORMATTER": f"{__name__}.broken_formatter"}


@pytest.mark.parametrize(
    ("site", "text"),
    [
        (_actor_for, "hello"),
        (_unknown_agent, "hello"),
        (_model_construction, "hello"),
        (_tool, "what are your hours?"),
        (_action_formatter, "cancel A-2"),
        (lambda settings, monkeypatch: None, "#fail"),
    ],
    ids=["actor_for", "unknown_agent", "model_construction", "tool", "action_formatter", "model"],
)
def test_a_failure_anywhere_ends_the_turn_with_the_failed_message(
    acct1: PersonalAgent, settings, monkeypatch, site, text
):
    site(settings, monkeypatch)
    conversation_id = acct1.start(text).json()["conversation_id"]
    events = acct1.settled(conversation_id)
    (reply,) = company(events)
    assert reply["text"] == FAILED
    assert events[-1]["type"] == "state" and events[-1]["status"] == "idle"
    conversation = Conversation.objects.get(pk=conversation_id)
    assert conversation.lease_owner is None and conversation.turn_attempts == 0
    assert conversation.answered_seq == conversation.turn_upto_seq > 0


# -- one turn per agent thread -------------------------------------------------------------


def test_a_direct_conversation_waits_for_its_parents_turn(acct1: PersonalAgent):
    parent = acct1.start("#slow please").json()["conversation_id"]
    acct1.events_until(parent, lambda evs: any(e.get("status") == "working" for e in evs))
    opened = acct1.start("#history", parent_conversation_id=parent)
    assert opened.status_code == 201, opened.content
    direct = opened.json()["conversation_id"]
    direct_reply = company(acct1.settled(direct))[-1]
    parent_reply = company(acct1.settled(parent))[-1]
    assert parent_reply["text"] == "Let me check that for you."
    # The Direct turn ran after the parent's, in the same thread: it saw what was written.
    assert direct_reply["text"] == "I see 2 messages; the first was: #slow please."
    # The thread is let go in the statement after the reply's commit: wait for it.
    eventually(
        lambda: Conversation.objects.get(pk=parent).thread_owner is None,
        what="the parent's thread to be released after the Direct's turn",
    )


class TimedModel:
    """Records when each turn's model ran; ``#slow`` runs until the test releases it."""

    def __init__(self) -> None:
        self.ran: dict[str, tuple[float, float]] = {}
        self.release = threading.Event()

    def run(self, turn: ModelTurn, call_tool, emit_text) -> None:
        started = time.monotonic()
        text = turn.inputs[-1].text or ""
        if "#slow" in text:
            assert self.release.wait(20), "the test never released the slow turn"
        emit_text("done")
        self.ran[text] = (started, time.monotonic())


def test_a_parents_turn_waits_for_a_turn_of_its_direct(
    use_model, acct1: PersonalAgent, monkeypatch
):
    model = TimedModel()
    use_model(model)
    parent = acct1.start("hello").json()["conversation_id"]
    acct1.settled(parent)
    opened = acct1.start("#slow please", parent_conversation_id=parent)
    assert opened.status_code == 201, opened.content
    direct = opened.json()["conversation_id"]
    eventually(
        lambda: Conversation.objects.get(pk=parent).thread_owner is not None,
        what="the Direct's turn to hold the parent's thread",
    )
    assert acct1.post(f"/{direct}/close").status_code == 200
    # The parent takes messages again; its claim finds its thread busy and its turn waits
    # (the Direct's turn still runs until released, after this message is in).
    assert acct1.send(parent, "and now").status_code == 202
    model.release.set()
    acct1.settled(parent)
    assert model.ran["and now"][0] >= model.ran["#slow please"][1]
    eventually(
        lambda: Conversation.objects.get(pk=parent).thread_owner is None,
        what="the parent's thread to be released after its turn",
    )


# -- the delta rule ------------------------------------------------------------------------


class SpeaksThenNeedsAScope:
    def run(self, turn: ModelTurn, call_tool, emit_text) -> None:
        stream_is_open()
        emit_text("Let me look ")
        emit_text("that up.")
        call_tool("list_orders", {})


def test_pieces_before_a_refused_call_are_written(use_model, agent: PersonalAgent, monkeypatch):
    use_model(SpeaksThenNeedsAScope())
    conversation_id = agent.start("my orders").json()["conversation_id"]
    frames = stream_until_idle(agent, conversation_id)
    stored = [f.json() for f in frames if f.event == "message"]
    deltas = [f.json() for f in frames if f.event == "text-delta"]
    (reply,) = company(stored)
    assert reply["text"] == "Let me look that up."
    assert {d["message_id"] for d in deltas} == {reply["id"]}
    kinds = [e["type"] for e in stored]
    assert kinds[-3:] == ["message", "authorization", "state"]
    assert stored[-2] == {**stored[-2], "error": "sign_in_required", "scope": "poppy:read"}


def test_a_refused_call_with_nothing_said_writes_no_message(agent: PersonalAgent):
    conversation_id = agent.start("my orders").json()["conversation_id"]
    events = agent.settled(conversation_id)
    assert company(events) == []
    assert [e["type"] for e in events][-2:] == ["authorization", "state"]


# -- call keys -----------------------------------------------------------------------------

seen_keys: list[str | None] = []


@tool(
    name="cancel_order",
    kind="action",
    roles=["scope:poppy:write"],
    summary="Cancel order {order_id}",
    needs_approval=True,
)
def cancel_after_approval(ctx: ToolContext, order_id: str) -> dict[str, Any]:
    """The example's cancel_order behind approval, keeping the call key it was given."""
    seen_keys.append(ctx.call_key)
    return shop.cancel_order.function(ctx, order_id=order_id)


def test_an_approved_action_runs_in_a_worker_with_its_call_key(acct1: PersonalAgent, settings):
    register(CompanyAgent(name="approving", tools=[cancel_after_approval]))
    settings.POPPY = {**settings.POPPY, "AGENT": "approving"}
    seen_keys.clear()
    conversation_id = acct1.start("cancel A-2").json()["conversation_id"]
    acct1.settled(conversation_id)
    record = ActionRecord.objects.get(conversation_id=conversation_id)
    assert record.status == ActionStatus.AWAITING_APPROVAL and seen_keys == []
    decisions.approve(record.pk, by="sam", request_id="req-call-key")
    events = acct1.events_until(
        conversation_id, lambda evs: len(company(evs)) == 2 and evs[-1]["type"] == "message"
    )
    assert company(events)[-1]["text"] == "Done: Cancel order A-2."
    assert seen_keys == [record.call_key]
    record.refresh_from_db()
    assert record.status == ActionStatus.SUCCEEDED and record.attempts == 1
    # The worker lets the conversation go once nothing is left to answer, after the outcome.
    eventually(
        lambda: Conversation.objects.get(pk=conversation_id).lease_owner is None,
        what="the worker's lease released after the approved action",
    )
