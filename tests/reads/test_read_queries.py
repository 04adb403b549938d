"""A JSON read is one statement on PostgreSQL (the conversation's row and the page's events
read together), or none when the process's tail holds the conversation; through HTTP; its
answers and their order stay the wire's, and a write racing it never splits its page."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from poppy_django import ids, service
from tests.agents import PersonalAgent
from tests.reads.conftest import Queries
from tests.wire.wire_support import add_company_messages, assert_error, quiet_start

pytestmark = pytest.mark.django_db(transaction=True)


def read(agent: PersonalAgent, conversation_id: str, queries: Queries, query: str = "") -> Any:
    queries.sql.clear()
    return agent.read(conversation_id, query)


@pytest.fixture(params=["tail", "database"])
def statements(request: pytest.FixtureRequest, settings: Any) -> int:
    """The statements a read after the first costs: none while the process's tail holds the
    conversation (its first read left it there, writes through the store extend it), one
    with the tail off (``TAIL_MAX_BYTES`` 0: every read asks the database)."""
    if request.param == "database":
        settings.POPPY = {**settings.POPPY, "TAIL_MAX_BYTES": 0}
        return 1
    return 0


def test_a_read_with_nothing_new_is_one_query_or_none(
    agent: PersonalAgent, queries: Queries, statements: int
) -> None:
    conversation_id = quiet_start(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    response = read(agent, conversation_id, queries, f"?cursor={cursor}")
    assert response.status_code == 200
    assert response.json()["events"] == [] and response.json()["cursor"] == cursor
    assert len(queries.sql) == statements, queries.sql
    assert queries.of("poppy_django_conversation") == queries.sql


def test_a_read_with_new_events_is_one_query_or_none(
    agent: PersonalAgent, queries: Queries, statements: int
) -> None:
    conversation_id = quiet_start(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    add_company_messages(conversation_id, 3)
    response = read(agent, conversation_id, queries, f"?cursor={cursor}")
    assert [e["message"]["text"] for e in response.json()["events"]] == [
        "note 0",
        "note 1",
        "note 2",
    ]
    assert len(queries.sql) == statements, queries.sql
    assert queries.of("poppy_django_conversation") == queries.of("poppy_django_event")
    # The event's company-side facts are not read: they never reach a personal agent.
    assert all('"meta"' not in sql for sql in queries.sql)


def test_a_first_read_is_one_query(agent: PersonalAgent, queries: Queries) -> None:
    conversation_id = quiet_start(agent)
    response = read(agent, conversation_id, queries)
    assert response.status_code == 200 and response.json()["events"]
    assert len(queries.sql) == 1, queries.sql


def test_a_full_page_is_one_query_and_says_there_is_more(
    agent: PersonalAgent, queries: Queries, settings: Any
) -> None:
    settings.POPPY = {**settings.POPPY, "PAGE_SIZE": 2}
    conversation_id = quiet_start(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    add_company_messages(conversation_id, 3)
    page = read(agent, conversation_id, queries, f"?cursor={cursor}").json()
    assert [e["message"]["text"] for e in page["events"]] == ["note 0", "note 1"]
    assert page["has_more"] is True and len(queries.sql) == 1, queries.sql
    rest = read(agent, conversation_id, queries, f"?cursor={page['cursor']}").json()
    assert [e["message"]["text"] for e in rest["events"]] == ["note 2"]
    assert rest["has_more"] is False


def test_a_long_poll_with_nothing_new_reads_once_then_once_again(
    agent: PersonalAgent, queries: Queries
) -> None:
    conversation_id = quiet_start(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    response = read(agent, conversation_id, queries, f"?cursor={cursor}&wait=0.1")
    assert response.status_code == 200 and response.json()["events"] == []
    # The request's ownership read, then the re-read once subscribed; nothing else.
    assert len(queries.sql) == 2, queries.sql


def test_a_long_poll_with_events_ready_answers_at_once_as_a_plain_read(
    agent: PersonalAgent, queries: Queries, statements: int
) -> None:
    conversation_id = quiet_start(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    add_company_messages(conversation_id, 2)
    plain = agent.read(conversation_id, f"?cursor={cursor}").json()
    response = read(agent, conversation_id, queries, f"?cursor={cursor}&wait=25")
    assert response.status_code == 200 and response.json() == plain
    assert len(queries.sql) == statements, queries.sql


def test_a_foreign_or_unknown_id_is_one_query_and_not_found(
    agent: PersonalAgent, queries: Queries
) -> None:
    conversation_id = quiet_start(agent)
    stranger = PersonalAgent()
    response = read(stranger, conversation_id, queries, "?cursor=evt_nonsense")
    assert_error(response, 404, "conversation_not_found")
    assert len(queries.sql) == 1
    unknown = ids.new_conversation_id()
    assert_error(read(agent, unknown, queries), 404, "conversation_not_found")
    assert len(queries.sql) == 1


def test_the_order_of_a_reads_refusals_is_unchanged(agent: PersonalAgent) -> None:
    conversation_id = quiet_start(agent)
    signed_in = agent.signed_in("acct-1", ("poppy:read", "poppy:write"))
    assert signed_in.send(conversation_id, None, context={"a": 1}).status_code == 202
    other_id = quiet_start(agent)
    foreign_cursor = agent.read(other_id).json()["cursor"]
    # Signed out, a signed-in conversation asks for sign-in before its cursor is looked at.
    assert_error(agent.read(conversation_id, f"?cursor={foreign_cursor}"), 403, "sign_in_required")
    # Another account's token sees the same 404 as an unknown id.
    elsewhere = agent.signed_in("acct-2", ("poppy:read",))
    assert_error(elsewhere.read(conversation_id), 404, "conversation_not_found")
    assert_error(
        signed_in.read(conversation_id, f"?cursor={foreign_cursor}"), 400, "invalid_cursor"
    )
    beyond = ids.event_id(conversation_id, 10_000)
    assert_error(signed_in.read(conversation_id, f"?cursor={beyond}"), 400, "invalid_cursor")
    page = signed_in.read(conversation_id).json()
    assert page["events"] and page["status"] == "idle"


def close_elsewhere(conversation_id: str) -> None:
    """The company closes the conversation in another thread (its own connection)."""

    def close() -> None:
        try:
            service.close(conversation_id, by="sam")
        finally:
            connection.close()

    closing = threading.Thread(target=close)
    closing.start()
    closing.join()


def test_a_write_racing_a_read_never_splits_its_page(
    agent: PersonalAgent, queries: Queries, settings: Any
) -> None:
    """Status and events are one snapshot, with a close landing right after the read's
    query: a page says ``closed`` exactly when it holds the closing event (read from the
    database: the tail's entries are replaced whole, never split)."""
    settings.POPPY = {**settings.POPPY, "TAIL_MAX_BYTES": 0}
    conversation_id = quiet_start(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    add_company_messages(conversation_id, 1)
    seen = 0

    def close_after_the_query(sql: str) -> None:
        nonlocal seen
        seen += 1
        if seen == 1:
            close_elsewhere(conversation_id)

    queries.after = close_after_the_query
    page = read(agent, conversation_id, queries, f"?cursor={cursor}").json()
    queries.after = None
    closing = [e for e in page["events"] if e["type"] == "state" and e["status"] == "closed"]
    assert page["events"][0]["message"]["text"] == "note 0"
    assert (page["status"] == "closed") == bool(closing), page
    rest = agent.read(conversation_id, f"?cursor={page['cursor']}").json()
    events = page["events"] + rest["events"]
    assert [(e["type"], e.get("status")) for e in events][-1] == ("state", "closed")
    assert rest["status"] == "closed"
