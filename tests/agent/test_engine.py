"""The turn engine: many turns in flight on one loop, a bound with backpressure, one heartbeat
for every lease, and a time limit that cancels one turn without touching its neighbours."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from poppy_django import tasks
from poppy_django.agent.llm import PydanticAIModel
from poppy_django.agent.model_api import ModelTurn
from poppy_django.agent.scripted import ScriptedModel
from poppy_django.conf import DEFAULT_TEXTS
from poppy_django.engine import deltas, transitions
from poppy_django.engine import loop as engine
from poppy_django.models import Conversation, Status
from tests.agents import PersonalAgent, messages
from tests.waiting import eventually

pytestmark = pytest.mark.django_db(transaction=True)

FAILED = DEFAULT_TEXTS["failed_turn"]


def reply_of(agent: PersonalAgent, conversation_id: str) -> str:
    return [m for m in messages(agent.settled(conversation_id)) if m["role"] == "company"][-1][
        "text"
    ]


class GatedModel:
    """Every turn waits on the loop until the test opens the gate: turns pile up in flight."""

    def __init__(self) -> None:
        self.waiting = 0
        self.most_waiting = 0
        self.gate: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    async def run(self, turn: ModelTurn, call_tool: Any, emit_text: Any) -> None:
        if self.gate is None:
            self.gate, self.loop = asyncio.Event(), asyncio.get_running_loop()
        self.waiting += 1
        self.most_waiting = max(self.most_waiting, self.waiting)
        try:
            await self.gate.wait()
        finally:
            self.waiting -= 1
        emit_text(f"done: {turn.inputs[-1].text}")

    def open(self) -> None:
        assert self.loop is not None and self.gate is not None
        self.loop.call_soon_threadsafe(self.gate.set)


def test_turns_wait_for_their_model_together_without_a_thread_each(
    use_model, agent: PersonalAgent, settings, monkeypatch
):
    settings.POPPY = {**settings.POPPY, "EXECUTOR_THREADS": 2, "TURNS_IN_FLIGHT": 50}
    model = GatedModel()
    use_model(model)
    started = [agent.start(f"hello {n}").json()["conversation_id"] for n in range(30)]
    # Thirty turns await their model at once on two database threads.
    eventually(lambda: model.waiting == 30)
    assert threading.active_count() < 30
    model.open()
    for n, conversation_id in enumerate(started):
        assert reply_of(agent, conversation_id) == f"done: hello {n}"


def test_past_the_bound_turns_wait_for_a_place_and_all_are_answered(
    use_model, agent: PersonalAgent, settings, monkeypatch
):
    settings.POPPY = {**settings.POPPY, "TURNS_IN_FLIGHT": 3}
    model = GatedModel()
    use_model(model)
    started = [agent.start(f"hello {n}").json()["conversation_id"] for n in range(8)]
    eventually(lambda: model.waiting == 3)
    running = engine.current()
    assert running.counters.in_flight == 3
    model.open()
    for n, conversation_id in enumerate(started):
        assert reply_of(agent, conversation_id) == f"done: hello {n}"
    assert running.counters.most_in_flight == 3
    assert model.most_waiting == 3


def test_a_celery_task_waits_for_a_place_before_it_returns(
    use_model, agent: PersonalAgent, settings, monkeypatch
):
    """While the engine is full the task does not return: its worker takes no more messages."""
    settings.POPPY = {**settings.POPPY, "TURNS_IN_FLIGHT": 1}
    model = GatedModel()
    use_model(model)
    first = agent.start("first").json()["conversation_id"]
    eventually(lambda: model.waiting == 1)
    from tests.turn_control import dispatch_lost

    with dispatch_lost():
        second = agent.start("second").json()["conversation_id"]
    task = threading.Thread(target=tasks.run_turns_task.run, args=(second,))
    task.start()
    # The first turn holds the only place; the task is still waiting for it.
    task.join(timeout=0.5)
    assert task.is_alive() and model.waiting == 1
    assert Conversation.objects.get(pk=second).lease_owner is None
    model.open()
    task.join(timeout=20)
    assert not task.is_alive()
    assert reply_of(agent, first) == "done: first"
    assert reply_of(agent, second) == "done: second"


class HangsOrAnswers:
    """``hang`` waits forever on the loop (until cancelled); anything else answers."""

    def __init__(self) -> None:
        self.cancelled = 0

    async def run(self, turn: ModelTurn, call_tool: Any, emit_text: Any) -> None:
        text = turn.inputs[-1].text or ""
        if text == "hang":
            emit_text("Let me ")
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        await ScriptedModel().run(turn, call_tool, emit_text)


def test_a_turn_past_its_limit_is_cancelled_and_its_neighbours_go_on(
    use_model, agent: PersonalAgent, settings, monkeypatch
):
    settings.POPPY = {**settings.POPPY, "TURN_TIMEOUT_SECONDS": 2.0}
    model = HangsOrAnswers()
    use_model(model)
    hung = agent.start("hang").json()["conversation_id"]
    neighbours = [agent.start(f"#slow {n}").json()["conversation_id"] for n in range(3)]
    for conversation_id in neighbours:
        assert reply_of(agent, conversation_id) == "Let me check that for you."
    assert reply_of(agent, hung) == FAILED
    assert model.cancelled == 1
    assert Conversation.objects.get(pk=hung).status == Status.IDLE


def test_a_turn_whose_connection_the_server_ended_commits_on_a_fresh_one(
    use_model, agent: PersonalAgent, settings, monkeypatch
):
    """PostgreSQL restarted while a turn awaits its model: the connection the engine's
    database thread keeps is ended by the server ("terminating connection due to
    administrator command"), so the commit meets it broken, and runs once more on a fresh
    connection: the reply is written, not the failed-turn message (issue 50)."""
    # One database thread: the commit runs on the connection the turn's start left open.
    settings.POPPY = {**settings.POPPY, "EXECUTOR_THREADS": 1}
    model = GatedModel()
    use_model(model)
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        (began,) = cursor.fetchone()
    conversation_id = agent.start("hello").json()["conversation_id"]
    eventually(lambda: model.waiting == 1, what="the turn awaiting its model")
    # Every session this test opened, ended: not those other threads of the test process
    # keep from earlier tests, which would meet "terminating connection" in a later test.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_start >= %s",
            [began],
        )
        (ended,) = cursor.fetchone()
    assert ended >= 1
    model.open()
    assert reply_of(agent, conversation_id) == "done: hello"


def test_a_provider_failing_mid_stream_ends_that_turn_alone(
    use_model, agent: PersonalAgent, monkeypatch
):
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        prompt = str(messages[-1].parts[-1].content)  # type: ignore[union-attr]
        yield "Half "
        await asyncio.sleep(0.2)
        if "break" in prompt:
            raise ConnectionError("the provider closed the stream")
        yield "and whole."

    model = PydanticAIModel(FunctionModel(stream_function=stream))
    use_model(model)
    broken = agent.start("break").json()["conversation_id"]
    fine = [agent.start(f"fine {n}").json()["conversation_id"] for n in range(3)]
    assert reply_of(agent, broken) == FAILED
    for conversation_id in fine:
        assert reply_of(agent, conversation_id) == "Half and whole."


def test_one_statement_renews_every_lease_the_process_holds(
    use_model, agent: PersonalAgent, monkeypatch
):
    model = GatedModel()
    use_model(model)
    started = [agent.start(f"hello {n}").json()["conversation_id"] for n in range(5)]
    eventually(lambda: model.waiting == 5)
    before = dict(Conversation.objects.filter(pk__in=started).values_list("pk", "lease_expires_at"))
    beat_at = timezone.now()
    with CaptureQueriesContext(connection) as captured:
        engine.current().heartbeat.beat()
    assert len(captured) == 1 and captured[0]["sql"].startswith("UPDATE")
    after = dict(Conversation.objects.filter(pk__in=started).values_list("pk", "lease_expires_at"))
    assert all(after[pk] > before[pk] and after[pk] > beat_at for pk in started)
    model.open()
    for conversation_id in started:
        reply_of(agent, conversation_id)


def test_a_turn_whose_lease_was_taken_over_stops_and_writes_nothing(
    use_model, agent: PersonalAgent, monkeypatch
):
    model = GatedModel()
    use_model(model)
    conversation_id = agent.start("hello").json()["conversation_id"]
    eventually(lambda: model.waiting == 1)
    # Another worker took the conversation over (this one stalled past its lease).
    Conversation.objects.filter(pk=conversation_id).update(lease_owner="another-worker")
    engine.current().heartbeat.beat()
    eventually(lambda: model.waiting == 0)  # its model was cancelled
    eventually(lambda: engine.current().idle())
    said = [m for m in messages(agent.read(conversation_id).json()["events"])]
    assert [m["role"] for m in said] == ["user"]
    assert Conversation.objects.get(pk=conversation_id).lease_owner == "another-worker"


def test_text_deltas_of_a_tick_go_out_together_each_message_joined_in_order():
    """The publishing thread sends what arrived within a tick in one call (one fan-out
    message), the consecutive pieces of each message joined: one publish a tick, not one
    a token. A flush sends what waits at once and says when it is out."""
    batches: list[list[tuple[str, str, str]]] = []
    publisher = deltas.DeltaPublisher(batches.append, tick=3600)  # only a flush sends
    try:
        for conversation, message, piece in [
            ("c1", "m1", "Hel"),
            ("c2", "m2", "Good"),
            ("c1", "m1", "lo "),
            ("c2", "m2", "bye"),
            ("c1", "m1", "there"),
        ]:
            publisher.publish(conversation, message, piece)
        sent = threading.Event()
        publisher.flush(sent.set)
        assert sent.wait(10)
        assert batches == [[("c1", "m1", "Hello there"), ("c2", "m2", "Goodbye")]]
        nothing_left = threading.Event()
        publisher.flush(nothing_left.set)  # nothing waits: said at once
        assert nothing_left.is_set()
        publisher.publish("c1", "m1", "!")
    finally:
        publisher.stop()  # what still waits is sent before the thread ends
    assert batches[-1] == [("c1", "m1", "!")]


def test_the_desk_gets_a_conversation_s_pieces_joined_once_a_desk_tick():
    """Readers get each tick's pieces; the desk's streams (one event per conversation) get
    them joined once a desk tick, or at once when a flush or the stop asks."""
    readers: list[list[tuple[str, str, str]]] = []
    desk: list[list[tuple[str, str, str]]] = []
    arrived = threading.Semaphore(0)

    def to_readers(deltas: list[tuple[str, str, str]]) -> None:
        readers.append(deltas)
        arrived.release()

    publisher = deltas.DeltaPublisher(to_readers, 0, desk.append, desk_tick=3600)
    try:
        for piece in ("Hel", "lo"):
            publisher.publish("c1", "m1", piece)
            assert arrived.acquire(timeout=10)
        assert readers == [[("c1", "m1", "Hel")], [("c1", "m1", "lo")]]
        assert desk == []
    finally:
        publisher.stop()
    assert desk == [[("c1", "m1", "Hello")]]


def test_a_streamed_reply_is_published_in_fewer_messages_than_pieces(
    use_model, agent: PersonalAgent, monkeypatch
):
    """A model writing piece by piece: the readers get every piece, in order, in fewer
    fan-out messages than pieces, all of them before the reply is committed."""
    from poppy_django.fanout import publishing

    sent: list[list[tuple[str, str, str]]] = []
    committed: list[int] = []
    publish, commit = publishing.publish_deltas_to_readers, transitions.commit

    def recorded(deltas: list[tuple[str, str, str]]) -> None:
        sent.append(list(deltas))
        publish(deltas)

    def committing(*args: Any, **kwargs: Any) -> Any:
        committed.append(len(sent))
        return commit(*args, **kwargs)

    monkeypatch.setattr(publishing, "publish_deltas_to_readers", recorded)
    monkeypatch.setattr(transitions, "commit", committing)
    pieces = [f"piece{n} " for n in range(40)]

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        for piece in pieces:
            yield piece

    use_model(FunctionModel(stream_function=stream))
    conversation_id = agent.start("hello").json()["conversation_id"]
    assert reply_of(agent, conversation_id) == "".join(pieces)
    assert "".join(text for batch in sent for _, _, text in batch) == "".join(pieces)
    assert len(sent) < len(pieces)
    assert committed == [len(sent)]
