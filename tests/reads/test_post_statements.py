"""A POST message is two statements on PostgreSQL: the conversation's locked read, then one
statement that writes its events, the row and the message's receipt (issue 28). Counted
through HTTP on every thread, so a regression that adds a round trip to the write fails.
Whatever the statements, the POST's guarantees stay: written before the 202, a retry
answered as the first delivery with nothing written twice."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.backends.utils import CursorWrapper

from poppy_django.models import Event, MessageReceipt
from tests.agents import PersonalAgent, unique
from tests.turn_control import dispatch_lost
from tests.wire.wire_support import quiet_start

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement write"),
]


class Queries:
    """The statements run meanwhile, by thread: a request's DRF cycle runs whole in one
    worker thread, so its statements are those of the thread that wrote the events (the
    engine's background sweeps, on other threads, are not the request's)."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str]] = []

    @property
    def sql(self) -> list[str]:
        writer = next(
            (thread for thread, sql in reversed(self.seen) if '"poppy_django_event"' in sql), None
        )
        return [sql for thread, sql in self.seen if thread == writer]

    def clear(self) -> None:
        self.seen.clear()


@pytest.fixture
def queries(monkeypatch: pytest.MonkeyPatch) -> Iterator[Queries]:
    seen = Queries()
    execute = CursorWrapper.execute

    def counted(self: CursorWrapper, sql: str, params: Any = None) -> Any:
        result = execute(self, sql, params)
        seen.seen.append((threading.get_ident(), sql))
        return result

    monkeypatch.setattr(CursorWrapper, "execute", counted)
    yield seen


def tables(sql: str) -> set[str]:
    return {
        name
        for name in (
            "poppy_django_event",
            "poppy_django_conversation",
            "poppy_django_messagereceipt",
        )
        if f'"{name}"' in sql
    }


def message(text: str | None = "hello", **fields: object) -> dict[str, object]:
    body: dict[str, object] = {"id": unique("m"), "sender": "agent", **fields}
    if text is not None:
        body["text"] = text
    return {"message": body}


@pytest.mark.parametrize(
    "body",
    [message("hello"), message(None, context={"locale": "fr"})],
    ids=["starts a turn", "context only"],
)
def test_a_post_message_is_a_locked_read_and_one_write(
    agent: PersonalAgent, queries: Queries, body: dict[str, object]
) -> None:
    conversation_id = quiet_start(agent)
    queries.clear()
    with dispatch_lost():  # no turn runs: only the request's statements are counted
        response = agent.post(f"/{conversation_id}/messages", body)
    assert response.status_code == 202, response.content
    assert len(queries.sql) == 2, queries.sql
    locked, write = queries.sql
    assert "FOR UPDATE" in locked
    assert tables(write) == {
        "poppy_django_event",
        "poppy_django_conversation",
        "poppy_django_messagereceipt",
    }
    # Durable before the 202: the events and the receipt are there.
    message_id = body["message"]["id"]  # type: ignore[index]
    assert Event.objects.filter(conversation_id=conversation_id, message_id=message_id).count() == 1
    assert MessageReceipt.objects.filter(message_id=message_id).count() == 1


def test_starting_a_conversation_is_its_insert_and_one_write(
    agent: PersonalAgent, queries: Queries
) -> None:
    with dispatch_lost():
        response = agent.post("", message("hello"))
    assert response.status_code == 201, response.content
    assert len(queries.sql) == 2, queries.sql
    assert tables(queries.sql[1]) == {
        "poppy_django_event",
        "poppy_django_conversation",
        "poppy_django_messagereceipt",
    }


def test_a_retry_is_answered_as_the_first_delivery_and_writes_nothing(
    agent: PersonalAgent,
) -> None:
    conversation_id = quiet_start(agent)
    body = message("hello")
    first = agent.post(f"/{conversation_id}/messages", body)
    events = Event.objects.filter(conversation_id=conversation_id).count()
    again = agent.post(f"/{conversation_id}/messages", body)
    assert (again.status_code, again.json()) == (first.status_code, first.json())
    assert Event.objects.filter(conversation_id=conversation_id).count() == events
    assert MessageReceipt.objects.filter(message_id=body["message"]["id"]).count() == 1  # type: ignore[index]
