"""A turn costs two transactions: the claim takes the lease and the agent thread in its own
reply's commit ends the conversation's work (idle, lease and thread freed) in the same write,
its events, the row and the thread's entries in one statement, with one nudge for its
readers. The engine's loop hands a turn to its database threads twice: before the model and
for the commit."""

from __future__ import annotations

import contextvars
from typing import Any

import pytest

from poppy_django.engine import loop as engine
from poppy_django.fanout import publishing
from poppy_django.models import Conversation
from tests.agents import PersonalAgent, kinds
from tests.turn_control import dispatch_lost, engine_queries

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def nudges(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The nudges published to conversations' readers."""
    sent: list[dict[str, Any]] = []
    original = publishing.bus.publish

    def publish(key: str, message_type: str, data: dict[str, Any], **options: Any) -> None:
        if message_type == publishing.NUDGE:
            sent.append(data)
        original(key, message_type, data, **options)

    monkeypatch.setattr(publishing.bus, "publish", publish)
    return sent


#: How the statement reading a thread's window starts (:func:`statements.thread_window`).
WINDOW = 'SELECT e."role", e."text" FROM "poppy_django_agentthreadentry"'


def commit_of(sql: list[str]) -> list[str]:
    """The statements of a turn's second transaction (its commit)."""
    return sql[sql.index("BEGIN", sql.index("COMMIT")) :]


def test_a_turn_is_a_claim_and_a_commit(
    agent: PersonalAgent, nudges: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
):
    with dispatch_lost():
        conversation_id = agent.start("hello").json()["conversation_id"]
        engine.run_turns(conversation_id)  # the first turn creates the agent thread
        assert agent.send(conversation_id, "and now?").status_code == 202
        nudges.clear()
        with engine_queries() as sql:
            database = engine.current().database
            jobs: list[str] = []
            submit = database.submit

            def counted(function: Any, *args: Any, **kwargs: Any) -> Any:
                # A job runs in a copy of the turn's context: name the function it runs.
                in_context = isinstance(getattr(function, "__self__", None), contextvars.Context)
                jobs.append((args[0] if in_context else function).__name__)
                return submit(function, *args, **kwargs)

            monkeypatch.setattr(database, "submit", counted)
            engine.run_turns(conversation_id)
            monkeypatch.undo()
    # The lease, the approvals, the claim and the turn's request in one job (the lease and the
    # claim in one transaction); the commit and
    # its moment in another: two hops from the loop to a database thread and back.
    assert jobs == ["begin", "commit_and_finish"]
    assert sql.count("BEGIN") == sql.count("COMMIT") == 2
    conversation_writes = [
        s
        for s in sql
        if s.startswith('UPDATE "poppy_django_conversation"')
        or (s.startswith("WITH") and 'UPDATE "poppy_django_conversation"' in s)
    ]
    # The lease (in the claim's transaction); the claim (attempt and thread); the commit
    # (reply, idle, lease and thread).
    assert len(conversation_writes) == 3
    assert '"thread_owner"' in conversation_writes[1] and '"thread_owner"' in conversation_writes[2]
    assert '"lease_owner" = NULL' in conversation_writes[2]
    # 7 statements and two BEGIN/COMMIT pairs: the claim (the lease taken, which returns the
    # row it locked; the approvals and the messages in one statement; attempt and thread); the
    # window; the commit (lock; the reply's receipt and the approvals in one statement; the
    # thread's positions taken, its entries, the events and the conversation in one). The log
    # is not read again when it has not grown. Was 13: the claim read the approvals and the
    # messages in two statements, and the thread's entries were written in one of their own.
    assert len(sql) == 11
    after_lock = commit_of(sql)[2]
    assert after_lock.startswith("SELECT EXISTS") and '"poppy_django_actionrecord"' in after_lock
    claim = sql[: sql.index("COMMIT") + 1]
    assert claim[0] == "BEGIN" and claim[1].startswith('UPDATE "poppy_django_conversation"')
    assert "RETURNING" in claim[1] and not any("FOR UPDATE" in s for s in claim)
    # After the lease, one read: the approved actions and the messages to answer together.
    assert '"poppy_django_actionrecord"' in claim[2] and '"poppy_django_event"' in claim[2]
    assert claim[3].startswith('UPDATE "poppy_django_conversation"')
    # The commit's events (the reply and the idle state), the row and the thread's entries go
    # in one statement.
    commit = commit_of(sql)
    event_inserts = [s for s in commit if 'INSERT INTO "poppy_django_event"' in s]
    assert len(event_inserts) == 1
    assert (
        event_inserts[0].startswith("WITH")
        and 'UPDATE "poppy_django_conversation"' in (event_inserts[0])
    )
    thread_writes = [s for s in commit if '"poppy_django_agentthread' in s]
    assert thread_writes == event_inserts
    assert 'UPDATE "poppy_django_agentthread"' in thread_writes[0]
    assert 'INSERT INTO "poppy_django_agentthreadentry"' in thread_writes[0]
    entries = Conversation.objects.get(pk=conversation_id).threads.get().history
    assert [entry["role"] for entry in entries][-2:] == ["user", "assistant"]
    # Before the model runs (up to the commit's BEGIN): the thread's window in one query.
    before_model = sql[: sql.index("BEGIN", sql.index("COMMIT"))]
    assert [s for s in before_model if "poppy_django_agentthread" in s] == [
        next(s for s in before_model if s.startswith(WINDOW))
    ]
    # The reply and the idle state reach readers (and the processes' tails) with one nudge.
    conversation = Conversation.objects.get(pk=conversation_id)
    assert [nudge["seq"] for nudge in nudges] == [conversation.last_seq]
    assert [event["type"] for event in nudges[0]["events"]] == ["message", "state"]
    events = agent.read(conversation_id).json()["events"]
    assert kinds(events)[-2:] == [("message", "company"), ("state", "idle", "agent")]
    assert conversation.lease_owner is None and conversation.thread_owner is None


def test_a_first_turn_stays_within_its_statements(agent: PersonalAgent):
    """The first turn of a conversation makes its agent thread too: a few more statements,
    counted exactly, and the thread's window read once."""
    with dispatch_lost():
        conversation_id = agent.start("hello").json()["conversation_id"]
        with engine_queries() as sql:
            engine.run_turns(conversation_id)
    assert kinds(agent.read(conversation_id).json()["events"])[-2:] == [
        ("message", "company"),
        ("state", "idle", "agent"),
    ]
    statements = [s for s in sql if s not in ("BEGIN", "COMMIT")]
    # The claim, the thread's window, the thread made in one statement (with its check for
    # other actors' threads: a sign-in transcript would go with it), and the commit. Was 16:
    # the thread was looked up once more before it was made, and its window read again after;
    # then 14: the thread made by get_or_create (its SELECT and a savepoint around its INSERT)
    # and the other actors' threads looked for in a statement of their own, the claim's
    # approvals and messages read in two, and the commit's thread entries written in one of
    # their own.
    assert len(statements) == 8
    made = [s for s in statements if 'INSERT INTO "poppy_django_agentthread"' in s]
    assert len(made) == 1 and "ON CONFLICT" in made[0]
    assert not any(s.startswith("SAVEPOINT") for s in statements)
    assert len([s for s in sql if s.startswith(WINDOW)]) == 1
    assert not any(s.startswith('SELECT "poppy_django_agentthread".') for s in sql)
