"""A POST message is two statements on PostgreSQL: the conversation's locked read, then one
statement that writes its events, the row and the message's receipt (issue 28). Counted
through HTTP on every thread, so a regression that adds a round trip to the write fails.
Whatever the statements, the POST's guarantees stay: written before the 202, a retry
answered as the first delivery with nothing written twice."""

from __future__ import annotations

import pytest
from django.db import connection

from poppy_django.models import Event, MessageReceipt
from tests.agents import PersonalAgent, unique
from tests.reads.conftest import Queries
from tests.turn_control import dispatch_lost
from tests.wire.wire_support import quiet_start

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement write"),
]


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
    assert len(queries.of_the_writer()) == 2, queries.of_the_writer()
    locked, write = queries.of_the_writer()
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
    assert len(queries.of_the_writer()) == 2, queries.of_the_writer()
    assert tables(queries.of_the_writer()[1]) == {
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
