"""The agent thread's memory: one row per entry, and a turn reads only the newest ones."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from poppy_django.agent.model_api import ModelTurn
from poppy_django.agent.scripted import ScriptedModel
from poppy_django.conf import poppy_settings
from poppy_django.engine import loop
from poppy_django.models import AgentThread, AgentThreadEntry, Conversation
from tests.agents import PersonalAgent, messages
from tests.turn_control import dispatch_lost, engine_queries
from tests.wire.wire_support import poppy

pytestmark = pytest.mark.django_db(transaction=True)


class RecordingModel:
    """The scripted model, remembering the history each turn was shown."""

    seen: list[list[dict[str, str]]] = []

    async def run(self, turn: ModelTurn, call_tool: Any, emit_text: Any) -> None:
        RecordingModel.seen.append(list(turn.history))
        await ScriptedModel().run(turn, call_tool, emit_text)


@pytest.fixture
def recording(use_model: Callable[[Any], None]) -> type[RecordingModel]:
    RecordingModel.seen = []
    use_model(RecordingModel())
    return RecordingModel


def said(agent: PersonalAgent, conversation_id: str, text: str) -> None:
    assert agent.send(conversation_id, text).status_code == 202
    agent.settled(conversation_id)


def test_a_turn_sees_the_earlier_turns_of_its_thread_in_order(agent, recording) -> None:
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    said(agent, conversation_id, "again")
    assert recording.seen == [
        [],
        [{"role": "user", "text": "hello"}, {"role": "assistant", "text": "You said: hello"}],
    ]
    thread = AgentThread.objects.get(conversation_id=conversation_id)
    assert list(thread.entries.order_by("position").values_list("position", "role")) == [
        (1, "user"),
        (2, "assistant"),
        (3, "user"),
        (4, "assistant"),
    ]
    assert thread.last_position == 4


def test_past_the_bound_the_model_gets_the_newest_entries_and_the_oldest_are_kept(
    agent, recording
) -> None:
    with poppy(THREAD_HISTORY_ENTRIES=3):
        conversation_id = agent.start("one").json()["conversation_id"]
        agent.settled(conversation_id)
        said(agent, conversation_id, "two")
        said(agent, conversation_id, "three")
    # Four entries before the third turn: the model saw the newest three, oldest first.
    assert recording.seen[-1] == [
        {"role": "assistant", "text": "You said: one"},
        {"role": "user", "text": "two"},
        {"role": "assistant", "text": "You said: two"},
    ]
    thread = AgentThread.objects.get(conversation_id=conversation_id)
    assert [entry["text"] for entry in thread.history] == [
        "one",
        "You said: one",
        "two",
        "You said: two",
        "three",
        "You said: three",
    ]


def test_the_sign_in_transcript_quotes_the_newest_messages_only(agent, recording) -> None:
    with poppy(THREAD_HISTORY_ENTRIES=2):
        conversation_id = agent.start("first").json()["conversation_id"]
        agent.settled(conversation_id)
        said(agent, conversation_id, "second")
        # Signed in, the account is a new actor: its first turn starts a thread of its own.
        signed_in = agent.signed_in("acct-1", ("poppy:read",))
        said(signed_in, conversation_id, "third")
    (transcript,) = recording.seen[-1]
    assert transcript["role"] == "system"
    # The newest two messages before the account's first turn, not the whole conversation.
    assert transcript["text"] == "What was said before:\nUser: second\nCompany: You said: second"


def seeded_turn(agent: PersonalAgent, entries: int) -> tuple[list[str], list[dict[str, str]]]:
    """The queries of one turn run here, in a thread of ``entries`` earlier entries."""
    with dispatch_lost():
        conversation_id = agent.start("hello").json()["conversation_id"]
        loop.run_turns(conversation_id)
        thread = AgentThread.objects.get(conversation_id=conversation_id)
        # Earlier turns' entries, as their turns would have left them.
        AgentThreadEntry.objects.bulk_create(
            AgentThreadEntry(thread=thread, position=position, role="user", text=f"old {position}")
            for position in range(thread.last_position + 1, entries + 1)
        )
        AgentThread.objects.filter(pk=thread.pk).update(last_position=entries)
        agent.send(conversation_id, "and now?")
        with engine_queries() as run:
            loop.run_turns(conversation_id)
    assert messages(agent.settled(conversation_id))[-1]["text"] == "You said: and now?"
    return run, RecordingModel.seen[-1]


def test_a_turns_queries_do_not_grow_with_its_thread(recording) -> None:
    short_queries, short_history = seeded_turn(PersonalAgent(), 10)
    long_queries, long_history = seeded_turn(PersonalAgent(), 1000)
    assert len(long_queries) == len(short_queries)
    # The thread's entries are read once, newest first, within the bound (200 of 1,000).
    (read,) = [
        sql
        for sql in long_queries
        if sql.startswith("SELECT") and '"poppy_django_agentthreadentry"' in sql
    ]
    assert read.endswith("DESC LIMIT 200")
    assert len(short_history) == 10
    assert len(long_history) == 200  # THREAD_HISTORY_ENTRIES' default
    assert long_history[0] == {"role": "user", "text": "old 801"}


def test_deleting_a_conversation_leaves_no_entries_behind(agent) -> None:
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    entries = list(
        AgentThreadEntry.objects.filter(thread__conversation_id=conversation_id).values_list(
            "pk", flat=True
        )
    )
    assert len(entries) == 2
    # What docs/operations.md suggests for closed conversations: an ORM delete.
    Conversation.objects.filter(pk=conversation_id).delete()
    assert not AgentThreadEntry.objects.filter(pk__in=entries).exists()


class ThreadDroppingModel:
    """Answers, after dropping the conversation's agent thread (from another thread, with its
    own connection) while the turn runs: its commit finds no thread for its entries."""

    async def run(self, turn: ModelTurn, call_tool: Any, emit_text: Any) -> None:
        conversation_id = turn.page_context["poppy"]["conversation_id"]
        await asyncio.to_thread(
            lambda: AgentThread.objects.filter(conversation_id=conversation_id).delete()
        )
        emit_text("never written")


def test_a_reply_is_written_with_its_thread_entries_or_not_at_all(
    agent: PersonalAgent, use_model: Callable[[Any], None]
) -> None:
    """The thread's entries go in the commit's one statement: a thread gone by then fails
    that statement's transaction, reply and all, and the turn ends with the failed-turn
    message (as a failed write of the entries on their own did)."""
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    use_model(ThreadDroppingModel())
    said(agent, conversation_id, "again")
    replies = [m for m in messages(agent.settled(conversation_id)) if m["role"] == "company"]
    assert "never written" not in [m.get("text") for m in replies]
    assert replies[-1]["text"] == poppy_settings.texts["failed_turn"]
    assert not AgentThread.objects.filter(conversation_id=conversation_id).exists()
