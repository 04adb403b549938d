"""A POST costs a fixed, small number of queries: a new message is written without looking
for its receipt first (a retry's write is refused by the receipt's unique key and rolled
back), its events are inserted together, the conversation's row is written once, a valid
message is not read before its locked read, and only a conversation that opened a Direct
Conversation looks for an open one.

Queries are counted in every thread (the endpoint runs its work off the event loop). No
turn runs: dispatches are recorded, not executed, so only the POST's own queries count.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection
from django.db.backends import utils

from poppy_django.conf import poppy_settings
from poppy_django.models import Event
from tests.agents import PersonalAgent

pytestmark = pytest.mark.django_db(transaction=True)


def the_write() -> list[str]:
    """A message's write: on PostgreSQL one statement (its events, the conversation's row and
    the receipt, a CTE: ``statements.written_at_once``); elsewhere the events in one insert,
    the row's one update, the receipt."""
    return ["WITH"] if connection.vendor == "postgresql" else ["INSERT", "UPDATE", "INSERT"]


class RecordedDispatches:
    """An executor that records the conversations it is handed."""

    dispatched: list[str] = []

    @classmethod
    def dispatch(cls, conversation_id: str) -> None:
        cls.dispatched.append(conversation_id)


@pytest.fixture(autouse=True)
def recorded(monkeypatch: pytest.MonkeyPatch) -> type[RecordedDispatches]:
    RecordedDispatches.dispatched = []
    monkeypatch.setattr(poppy_settings, "EXECUTOR", RecordedDispatches)
    return RecordedDispatches


@pytest.fixture
def queries(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``with queries() as sql:`` lists the statements run meanwhile, in any thread."""
    original = utils.CursorWrapper.execute
    lock = threading.Lock()
    recording: list[list[str]] = []

    def execute(self: utils.CursorWrapper, sql: str, params: Any = None) -> Any:
        with lock:
            for statements in recording:
                statements.append(sql)
        return original(self, sql, params)

    monkeypatch.setattr(utils.CursorWrapper, "execute", execute)

    @contextmanager
    def capture() -> Iterator[list[str]]:
        statements: list[str] = []
        recording.append(statements)
        try:
            yield statements
        finally:
            recording.remove(statements)

    return capture


def verbs(statements: list[str]) -> list[str]:
    return [sql.split(" ", 1)[0] for sql in statements]


def test_a_turn_starting_start_writes_the_new_row_once(
    agent: PersonalAgent, queries: Any, recorded: type[RecordedDispatches]
) -> None:
    with queries() as sql:
        response = agent.start("hello")
    assert response.status_code == 201
    # The conversation's row, then its message and state events, the row's update and the
    # receipt written together.
    assert verbs(sql) == ["INSERT", *the_write()]
    assert recorded.dispatched == [response.json()["conversation_id"]]


def test_a_context_only_message_writes_the_row_once(agent: PersonalAgent, queries: Any) -> None:
    conversation_id = agent.start(None, context={"page": "home"}).json()["conversation_id"]
    with queries() as sql:
        response = agent.send(conversation_id, None, context={"page": "cart"})
    assert response.status_code == 202
    # The locked read (ownership; no Direct was ever opened, so none is looked for), then the
    # event, the row (context and last_seq together) and the receipt written together.
    assert verbs(sql) == ["SELECT", *the_write()]


def test_a_turn_starting_message_writes_the_row_once(
    agent: PersonalAgent, queries: Any, recorded: type[RecordedDispatches]
) -> None:
    conversation_id = agent.start(None, context={"page": "home"}).json()["conversation_id"]
    with queries() as sql:
        response = agent.send(conversation_id, "where is my order?")
    assert response.status_code == 202 and response.json()["status"] == "working"
    # As above, the state event inserted with the message: status and last_seq in the row's
    # one update.
    assert verbs(sql) == ["SELECT", *the_write()]
    assert sum(1 for statement in sql if 'INSERT INTO "poppy_django_event"' in statement) == 1
    assert recorded.dispatched == [conversation_id]


def test_a_retried_message_is_answered_from_its_receipt_and_writes_nothing(
    agent: PersonalAgent, queries: Any, recorded: type[RecordedDispatches]
) -> None:
    conversation_id = agent.start("hello").json()["conversation_id"]
    first = agent.send(conversation_id, "again", id="m-retried")
    events = Event.objects.filter(conversation_id=conversation_id).count()
    recorded.dispatched.clear()
    with queries() as sql:
        retry = agent.send(conversation_id, "again", id="m-retried")
    assert (retry.status_code, retry.json()) == (first.status_code, first.json())
    # The write, refused at its receipt and rolled back; then the receipt, with its
    # conversation for ownership.
    assert verbs(sql) == ["SELECT", *the_write(), "SELECT"]
    assert '"poppy_django_messagereceipt"' in sql[-1]
    assert Event.objects.filter(conversation_id=conversation_id).count() == events
    assert recorded.dispatched == []


def test_once_a_direct_was_opened_messages_look_for_it(agent: PersonalAgent, queries: Any) -> None:
    parent = agent.start(None, context={"page": "home"}).json()["conversation_id"]
    direct = agent.start("private", parent_conversation_id=parent).json()["conversation_id"]
    agent.post(f"/{direct}/close")
    with queries() as sql:
        response = agent.send(parent, None, context={"page": "cart"})
    assert response.status_code == 202
    assert verbs(sql) == ["SELECT", "SELECT", *the_write()]
