"""The rows a hot statement returns are the model instances Django's ``RawQuerySet`` would
build from it: every column converted alike (JSON decoded, datetimes aware), the columns it
did not select deferred, on the database the tests run on."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.db.models import Model

from poppy_django.models import Conversation, Event
from poppy_django.store import backends, reading
from tests.agents import PersonalAgent
from tests.staff import company_message
from tests.wire.wire_support import quiet_start

pytestmark = pytest.mark.django_db


def store() -> backends.StoreBackend:
    return backends.for_alias("default")


def same_values(built: Model, expected: Model) -> None:
    """Every concrete field ``expected`` holds, equal and of the same type in ``built``."""
    assert type(built) is type(expected)
    assert built.get_deferred_fields() == expected.get_deferred_fields()
    assert built._state.db == expected._state.db
    assert built._state.adding is False
    for field in type(expected)._meta.concrete_fields:
        if field.attname in expected.get_deferred_fields():
            continue
        ours, django = getattr(built, field.attname), getattr(expected, field.attname)
        assert ours == django, field.name
        assert type(ours) is type(django), field.name


def test_rows_are_the_instances_raw_querysets_build(agent: PersonalAgent) -> None:
    conversation_id = quiet_start(agent)
    company_message(conversation_id, "hello", data={"order": [1, "two", None]})

    locked = store().sql.conversation_locked(row_locks=connection.vendor != "sqlite")
    with transaction.atomic():
        (whole,) = store().fetch(Conversation, locked, [conversation_id])
        (expected,) = Conversation.objects.raw(locked, [conversation_id])
    same_values(whole, expected)
    assert whole.created_at.tzinfo is not None

    partial_sql = store().sql.conversation_by_id(reading.READ_FIELDS)
    (partial,) = store().fetch(Conversation, partial_sql, [conversation_id])
    same_values(partial, next(iter(Conversation.objects.raw(partial_sql, [conversation_id]))))
    assert "context" in partial.get_deferred_fields()

    events_sql = store().sql.events_in_range(reading.EVENT_FIELDS)
    parameters = [conversation_id, 0, whole.last_seq, 100]
    events = store().fetch(Event, events_sql, parameters)
    expected_events = list(Event.objects.raw(events_sql, parameters))
    assert len(events) == len(expected_events) == whole.last_seq
    for event, expected_event in zip(events, expected_events, strict=True):
        same_values(event, expected_event)
    assert events[-1].payload["message"]["data"] == {"order": [1, "two", None]}
    assert [event.to_wire() for event in events] == [e.to_wire() for e in expected_events]


def test_no_rows_is_an_empty_list(agent: PersonalAgent) -> None:
    sql = store().sql.conversation_by_id(reading.READ_FIELDS)
    assert store().fetch(Conversation, sql, ["cnv_" + "0" * 32]) == []


def test_a_column_the_model_lacks_is_refused(agent: PersonalAgent) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("elsewhere RawQuerySet runs the statement and keeps the extra column")
    conversation_id = quiet_start(agent)
    sql = f'SELECT "id", 1 AS "surplus" FROM "{Conversation._meta.db_table}" WHERE "id" = %s'
    with pytest.raises(ValueError, match="surplus"):
        store().fetch(Conversation, sql, [conversation_id])


def test_a_row_and_its_events_in_one_statement_are_what_the_two_statements_build(
    agent: PersonalAgent,
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the row and its events are read together on PostgreSQL only")
    conversation_id = quiet_start(agent)
    for n in range(3):
        company_message(conversation_id, f"note {n}", data={"n": [n, None]})
    together = store().sql.conversation_and_events(reading.READ_FIELDS, reading.EVENT_FIELDS)
    row_sql = store().sql.conversation_by_id(reading.READ_FIELDS)
    (row,) = Conversation.objects.raw(row_sql, [conversation_id])
    events_sql = store().sql.events_in_range(reading.EVENT_FIELDS)

    for after, most in [(0, 100), (1, 2), (row.last_seq, 100)]:
        conversation, events = store().fetch_with_children(
            Conversation, Event, together, [after, most, conversation_id]
        )
        assert conversation is not None
        same_values(conversation, row)
        expected = list(Event.objects.raw(events_sql, [conversation_id, after, row.last_seq, most]))
        assert len(events) == len(expected) == min(most, row.last_seq - after)
        for event, expected_event in zip(events, expected, strict=True):
            same_values(event, expected_event)

    unknown = store().fetch_with_children(
        Conversation, Event, together, [0, 100, "cnv_" + "0" * 32]
    )
    assert unknown == (None, [])


def test_a_page_stops_at_the_rows_last_seq(agent: PersonalAgent) -> None:
    """Events past the row's ``last_seq`` (a write's, not yet hers when the row was read)
    are not the page's: the statement bounds them by the ``last_seq`` it read."""
    if connection.vendor != "postgresql":
        pytest.skip("the row and its events are read together on PostgreSQL only")
    conversation_id = quiet_start(agent)
    company_message(conversation_id, "kept")
    last_seq = Conversation.objects.get(pk=conversation_id).last_seq
    Conversation.objects.filter(pk=conversation_id).update(last_seq=last_seq - 1)
    page = reading.read_page(conversation_id, 0, None)
    assert [int(e["id"].rpartition("_")[2]) for e in page.events] == list(range(1, last_seq))
