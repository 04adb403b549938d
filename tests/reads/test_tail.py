"""The process's tail of recent events (issue 54), through HTTP: a read it holds is answered
with no query and exactly as the database answers it; whatever it cannot vouch for — a write
it did not hear, a pruning, a deletion, an account's binding, a cursor it does not hold, a
conversation its bound pushed out — is answered by the database, as before."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from django.db import connection
from django.test import Client, override_settings

from poppy_django import fanout
from poppy_django.client import DPoPKey
from poppy_django.fanout import versions
from poppy_django.models import Conversation
from poppy_django.store import event_log
from poppy_django.store.tail import tail
from poppy_django.verifier import dpop
from tests.agents import PersonalAgent
from tests.auth.conftest import dpop_poppy
from tests.auth.support import BASE_URL, ENDPOINT_URL, NOW, Issuer, proof
from tests.failing_publish import HeldRetries, PublishFault
from tests.reads.conftest import Queries
from tests.threaded_server import serve
from tests.waiting import eventually
from tests.wire.wire_support import add_company_messages, assert_error, quiet_start

pytestmark = pytest.mark.django_db(transaction=True)


def read(agent: PersonalAgent, conversation_id: str, queries: Queries, query: str = "") -> Any:
    """The read's response; ``queries`` then holds the statements it ran."""
    queries.clear()
    response = agent.read(conversation_id, query)
    assert response.status_code == 200, response.content[:300]
    return response


def held(agent: PersonalAgent, queries: Queries) -> tuple[str, str]:
    """A conversation this process's tail holds (its first read left it there, its second
    is answered with no query), and the cursor of its newest event."""
    conversation_id = quiet_start(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    read(agent, conversation_id, queries, f"?cursor={cursor}")
    assert queries.of_this_thread() == []
    return conversation_id, cursor


def read_to_the_end(agent: PersonalAgent, conversation_id: str) -> list[dict[str, Any]]:
    """Every event, page by page (the last page, reaching the newest, is what a tail keeps)."""
    events: list[dict[str, Any]] = []
    query = ""
    while True:
        page = agent.read(conversation_id, query).json()
        events += page["events"]
        if not page["has_more"]:
            return events
        query = f"?cursor={page['cursor']}"


def cursors(conversation_id: str, events: list[dict[str, Any]]) -> list[str]:
    """A read from the start, then from each event, with and without a wait."""
    after_each = [f"?cursor={event['id']}" for event in events]
    return ["", *after_each, *(f"{query}&wait=5" for query in after_each[:-1])]


def test_a_held_read_answers_what_the_database_answers(
    agent: PersonalAgent, queries: Queries, settings: Any
) -> None:
    settings.POPPY = {**settings.POPPY, "PAGE_SIZE": 3, "TAIL_MAX_BYTES": 0}
    conversation_id = quiet_start(agent)
    add_company_messages(conversation_id, 6)  # seq 1..7
    events = read_to_the_end(agent, conversation_id)
    from_database = {}
    for query in cursors(conversation_id, events):
        response = read(agent, conversation_id, queries, query)
        assert len(queries.of_this_thread()) == 1, (query, queries.of_this_thread())
        from_database[query] = response

    settings.POPPY = {**settings.POPPY, "TAIL_MAX_BYTES": 1024 * 1024}
    assert read_to_the_end(agent, conversation_id) == events  # its last page is kept
    # Held: what the last page read (seq 7), so cursors from seq 6 on; a read from an earlier
    # cursor that reaches the newest event is kept in its place. Never from the start: the
    # first events are not held.
    for query, expected in from_database.items():
        response = read(agent, conversation_id, queries, query)
        seq = int(query.split("_")[-1].split("&")[0]) if query else 0
        if seq >= 6:
            assert queries.of_this_thread() == [], query
        elif seq == 0:
            assert len(queries.of_this_thread()) == 1, queries.of_this_thread()
        else:
            assert len(queries.of_this_thread()) <= 1, (query, queries.of_this_thread())
        assert response.json() == expected.json(), query
        for header in ("Content-Type", "Cache-Control"):
            assert response[header] == expected[header], (query, header)
        assert response["X-Request-ID"].startswith("req_")
    sent = agent.read(conversation_id, f"?cursor={events[-1]['id']}", HTTP_X_REQUEST_ID="req_abc")
    assert sent["X-Request-ID"] == "req_abc"


def test_writes_extend_what_is_held(agent: PersonalAgent, queries: Queries) -> None:
    conversation_id = quiet_start(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    add_company_messages(conversation_id, 2)
    page = read(agent, conversation_id, queries, f"?cursor={cursor}").json()
    assert [e["message"]["text"] for e in page["events"]] == ["note 0", "note 1"]
    assert queries.of_this_thread() == []
    # A message the agent posts is in its next read (the write set the version first).
    assert agent.send(conversation_id, None, context={"a": 1}).status_code == 202
    page = read(agent, conversation_id, queries, f"?cursor={page['cursor']}").json()
    assert [e["message"]["context"] for e in page["events"]] == [{"a": 1}]
    assert queries.of_this_thread() == []


def test_a_stranger_and_bad_cursors_get_the_databases_answers(
    agent: PersonalAgent, queries: Queries
) -> None:
    conversation_id, cursor = held(agent, queries)
    assert_error(PersonalAgent().read(conversation_id), 404, "conversation_not_found")
    beyond = f"{cursor.rsplit('_', 1)[0]}_9"
    assert_error(agent.read(conversation_id, f"?cursor={beyond}"), 400, "invalid_cursor")
    assert_error(agent.read(conversation_id, "?wait=-1"), 400, "invalid_request")
    other = quiet_start(agent)
    foreign = agent.read(other).json()["cursor"]
    assert_error(agent.read(conversation_id, f"?cursor={foreign}"), 400, "invalid_cursor")


def test_binding_to_an_account_is_never_read_from_what_was_held(
    agent: PersonalAgent, queries: Queries
) -> None:
    conversation_id, cursor = held(agent, queries)
    signed_in = agent.signed_in("acct-1", ("poppy:read", "poppy:write"))
    # A handoff binds the conversation to the account whether or not it adds an event.
    assert signed_in.post(f"/{conversation_id}/handoff", {}).status_code == 202
    assert_error(agent.read(conversation_id, f"?cursor={cursor}"), 403, "sign_in_required")
    assert signed_in.read(conversation_id, f"?cursor={cursor}").status_code == 200
    assert_error(agent.read(conversation_id, f"?cursor={cursor}"), 403, "sign_in_required")


def test_a_pruned_or_deleted_conversation_is_read_from_the_database(
    agent: PersonalAgent, queries: Queries
) -> None:
    conversation_id = quiet_start(agent)
    add_company_messages(conversation_id, 3)  # seq 1..4
    events = agent.read(conversation_id).json()["events"]
    read(agent, conversation_id, queries, f"?cursor={events[1]['id']}")
    assert queries.of_this_thread() == []
    event_log.expire_before(conversation_id, 3)  # the product's pruning marks them first
    assert_error(agent.read(conversation_id, f"?cursor={events[0]['id']}"), 410, "cursor_expired")
    Conversation.objects.filter(pk=conversation_id).delete()
    assert_error(
        agent.read(conversation_id, f"?cursor={events[2]['id']}"), 404, "conversation_not_found"
    )


def test_the_bound_pushes_out_the_least_recently_read(
    agent: PersonalAgent, queries: Queries, settings: Any
) -> None:
    # Room for about two conversations of one small event each (1 KiB of overhead each).
    settings.POPPY = {**settings.POPPY, "TAIL_MAX_BYTES": 2600}
    started = [quiet_start(agent) for _ in range(3)]
    last = {cid: agent.read(cid).json()["cursor"] for cid in started}
    for conversation_id in started[1:]:
        read(agent, conversation_id, queries, f"?cursor={last[conversation_id]}")
        assert queries.of_this_thread() == [], conversation_id
    read(agent, started[0], queries, f"?cursor={last[started[0]]}")
    assert len(queries.of_this_thread()) == 1  # pushed out by the two read after it
    read(agent, started[0], queries, f"?cursor={last[started[0]]}")
    assert queries.of_this_thread() == []  # held again, in place of the least recently read
    read(agent, started[1], queries, f"?cursor={last[started[1]]}")
    assert len(queries.of_this_thread()) == 1


@pytest.fixture
def served_over_redis() -> Iterator[str]:
    """The example project's ASGI application under uvicorn, its fan-out over the test Redis:
    versions there, nudges heard only on a subscription (none here: no reader waits)."""
    from example_project.asgi import application

    url = urlsplit(os.environ.get("POPPY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
    kwargs = {"host": url.hostname, "port": url.port or 6379, "db": int(url.path.strip("/"))}
    with override_settings(EVENTSTREAM_REDIS=kwargs), serve(application) as base_url:
        yield base_url


def test_a_write_this_process_did_not_hear_is_read_from_the_database(
    agent: PersonalAgent, queries: Queries, served_over_redis: str
) -> None:
    agent = agent.at(served_over_redis)
    conversation_id = quiet_start(agent)
    cursor = read(agent, conversation_id, queries).json()["cursor"]
    read(agent, conversation_id, queries, f"?cursor={cursor}")
    assert queries.sql == []  # what the first read found is current
    add_company_messages(conversation_id, 1)  # another process's write, as far as we know
    page = read(agent, conversation_id, queries, f"?cursor={cursor}").json()
    assert [e["message"]["text"] for e in page["events"]] == ["note 0"]
    assert len(queries.sql) == 1
    read(agent, conversation_id, queries, f"?cursor={cursor}")
    assert queries.sql == []  # held again, from that read


def _held_over_redis(agent: PersonalAgent, queries: Queries) -> tuple[str, str]:
    """A conversation whose newest state this process's tail holds and the version on Redis
    vouches for (its second read is answered with no query), and the cursor of its end."""
    conversation_id = quiet_start(agent)
    cursor = read(agent, conversation_id, queries).json()["cursor"]
    read(agent, conversation_id, queries, f"?cursor={cursor}")
    assert queries.sql == []
    return conversation_id, cursor


def test_a_message_whose_publish_failed_is_in_the_writers_next_read(
    agent: PersonalAgent,
    queries: Queries,
    served_over_redis: str,
    publish_fault: PublishFault,
    held_retries: HeldRetries,
) -> None:
    """Read-your-writes when the write's publish (its version's SET with its nudge) meets a
    Redis error: the version on Redis is still the previous write's, which the tail holds,
    and the retry has not run yet; the 202's own process reads the message anyway."""
    agent = agent.at(served_over_redis)
    conversation_id, cursor = _held_over_redis(agent, queries)
    publish_fault.arm()
    assert agent.send(conversation_id, None, context={"a": 1}).status_code == 202
    assert publish_fault.failed == 1
    page = read(agent, conversation_id, queries, f"?cursor={cursor}").json()
    assert [e["message"]["context"] for e in page["events"]] == [{"a": 1}]


def test_after_a_failed_publish_no_tail_trusts_the_version_it_left(
    agent: PersonalAgent,
    queries: Queries,
    served_over_redis: str,
    publish_fault: PublishFault,
    quick_retries: None,
) -> None:
    """Every other process holding the conversation compares what it holds with the version
    on Redis: once retried, that is no longer the one the write's failed publish left there
    (which those tails hold, without the write). The next write's own version replaces it,
    and reads are answered from the tail again."""
    agent = agent.at(served_over_redis)
    conversation_id, cursor = _held_over_redis(agent, queries)
    held = tail.entry(conversation_id)
    assert held is not None  # what another process that read it holds as well
    url = urlsplit(os.environ.get("POPPY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
    server = redis.Redis(host=url.hostname, port=url.port or 6379, db=int(url.path.strip("/")))
    key = versions.version_key(held.key)
    assert server.get(key) == held.version.encode()
    publish_fault.arm()
    assert agent.send(conversation_id, None, context={"a": 1}).status_code == 202
    assert publish_fault.failed == 1
    eventually(lambda: server.get(key) != held.version.encode(), what="the version's retry")
    assert server.get(key) not in (None, held.version.encode())  # out of date: read the database
    page = read(agent, conversation_id, queries, f"?cursor={cursor}").json()
    assert [e["message"]["context"] for e in page["events"]] == [{"a": 1}]

    assert agent.send(conversation_id, None, context={"b": 2}).status_code == 202
    page = read(agent, conversation_id, queries, f"?cursor={page['cursor']}").json()
    assert [e["message"]["context"] for e in page["events"]] == [{"b": 2}]
    read(agent, conversation_id, queries, f"?cursor={page['cursor']}")
    assert queries.sql == []  # the write's own version: held and current again
    server.close()


def _written_in_a_thread(conversation_id: str) -> threading.Thread:
    """A staff note written on a thread of its own, as another request's would be."""

    def write() -> None:
        try:
            add_company_messages(conversation_id, 1)
        finally:
            connection.close()

    thread = threading.Thread(target=write, name="the-first-write")
    thread.start()
    return thread


def test_an_older_writes_late_publish_never_hides_a_newer_write(
    agent: PersonalAgent,
    queries: Queries,
    served_over_redis: str,
    version_server: redis.Redis,
    publish_fault: PublishFault,
) -> None:
    """Two writes commit in order, but the first one's publish (its version's SET with its
    nudge) lands after the second one's. A process that read the first write from the
    database holds it; the version on Redis stays the second write's, so that process's next
    read asks the database and has the second write."""
    agent = agent.at(served_over_redis)
    conversation_id = quiet_start(agent)
    publish_fault.delay()
    first = _written_in_a_thread(conversation_id)
    assert publish_fault.delayed.wait(20), "the first write's publish was never reached"
    page = read(agent, conversation_id, queries).json()
    assert [e["type"] for e in page["events"]] == ["message", "message"]  # held now
    assert queries.sql  # from the database, not from an entry older than the first write
    key = versions.version_key(fanout.conversation_channel(conversation_id))
    add_company_messages(conversation_id, 1)  # the second write: its publish lands at once
    newer = version_server.get(key)
    publish_fault.land()
    first.join(20)
    assert not first.is_alive()
    later = read(agent, conversation_id, queries, f"?cursor={page['cursor']}").json()
    assert [e["message"]["text"] for e in later["events"]] == ["note 0"]
    assert version_server.get(key) == newer  # what every other process compares with


@pytest.fixture
def version_server(served_over_redis: str) -> Iterator[redis.Redis]:
    """A client of the test Redis of its own: what another process reads there."""
    url = urlsplit(os.environ.get("POPPY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
    client = redis.Redis(host=url.hostname, port=url.port or 6379, db=int(url.path.strip("/")))
    yield client
    client.close()


def _held_with_events(
    agent: PersonalAgent, queries: Queries, version_server: redis.Redis
) -> tuple[str, list[dict[str, Any]], str]:
    """A conversation of four events that this process's tail holds, all four, with the
    version on Redis vouching for them (a read from its second is answered with no query):
    its id, its events, and its version's key on Redis."""
    conversation_id = quiet_start(agent)
    add_company_messages(conversation_id, 3)  # seq 1..4
    events = read(agent, conversation_id, queries).json()["events"]
    read(agent, conversation_id, queries, f"?cursor={events[1]['id']}")
    assert queries.sql == []
    held = tail.entry(conversation_id)
    assert held is not None  # what another process that read it holds as well
    key = versions.version_key(held.key)
    assert version_server.get(key) == held.version.encode()
    return conversation_id, events, key


def _change(conversation_id: str, change: str) -> tuple[int, str]:
    """Prune the conversation's first two events, or delete it: what a read from its first
    event is then answered (the database's answer)."""
    if change == "pruned":
        event_log.expire_before(conversation_id, 3)  # the product's pruning marks them first
        return 410, "cursor_expired"
    Conversation.objects.filter(pk=conversation_id).delete()
    return 404, "conversation_not_found"


def _answer(agent: PersonalAgent, conversation_id: str, cursor: str) -> tuple[int, str | None]:
    response = agent.read(conversation_id, f"?cursor={cursor}")
    return response.status_code, response.json().get("error")


@pytest.mark.parametrize("change", ["pruned", "deleted"])
def test_a_change_whose_mark_failed_is_read_from_the_database_here_at_once(
    agent: PersonalAgent,
    queries: Queries,
    served_over_redis: str,
    version_server: redis.Redis,
    publish_fault: PublishFault,
    held_retries: HeldRetries,
    change: str,
) -> None:
    """A pruning or a deletion marks the conversation out of date on Redis; when that meets a
    Redis error, the version there is still the one this process's tail holds (with what the
    change took away), and the retry has not run yet: this process asks the database."""
    agent = agent.at(served_over_redis)
    conversation_id, events, key = _held_with_events(agent, queries, version_server)
    version = version_server.get(key)
    publish_fault.arm_mark()
    expected = _change(conversation_id, change)
    assert publish_fault.failed == 1
    assert version_server.get(key) == version
    assert _answer(agent, conversation_id, events[0]["id"]) == expected


@pytest.mark.parametrize("change", ["pruned", "deleted"])
def test_after_a_failed_mark_no_tail_trusts_the_version_from_before_the_change(
    agent: PersonalAgent,
    queries: Queries,
    served_over_redis: str,
    version_server: redis.Redis,
    publish_fault: PublishFault,
    quick_retries: None,
    change: str,
) -> None:
    """Every other process holding the conversation compares what it holds (the same entry
    as this one's) with the version on Redis: once retried, that is an out-of-date mark."""
    agent = agent.at(served_over_redis)
    conversation_id, events, key = _held_with_events(agent, queries, version_server)
    publish_fault.arm_mark()
    expected = _change(conversation_id, change)
    assert publish_fault.failed == 1
    forgotten = versions.FORGOTTEN.encode()
    eventually(lambda: version_server.get(key) == forgotten, what="the mark's retry")
    assert _answer(agent, conversation_id, events[0]["id"]) == expected


def test_the_dpop_verifier_checks_a_held_read_as_strictly(queries: Queries, settings: Any) -> None:
    """The DPoP verifier's checks without a blocking call: a new proof is accepted with no
    query, the same proof again is refused as a replay, an expired token as expired."""
    issuer, pa_key = Issuer(), DPoPKey()
    dpop_poppy(settings, issuer)
    dpop.reset()
    clock = [float(NOW)]
    dpop.get_verifier().clock = lambda: clock[0]
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)

    def get(path: str, query: str = "", signed: str | None = None) -> Any:
        signed = signed or proof(pa_key, "GET", f"{BASE_URL}{path}", token, now=clock[0])
        queries.clear()
        return Client().get(f"{path}{query}", HTTP_AUTHORIZATION=f"DPoP {token}", HTTP_DPOP=signed)

    started = Client().post(
        "/poppy/conversations",
        data=json.dumps({"message": {"id": "m1", "sender": "agent", "context": {"a": 1}}}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"DPoP {token}",
        HTTP_DPOP=proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW),
    )
    assert started.status_code == 201, started.content
    path = f"/poppy/conversations/{started.json()['conversation_id']}/events"
    cursor = get(path).json()["cursor"]
    signed = proof(pa_key, "GET", f"{BASE_URL}{path}", token, now=NOW)
    held = get(path, f"?cursor={cursor}", signed)
    # Answered from the tail: no statement on this thread (where the test client runs a
    # request's database work).
    assert (
        held.status_code == 200 and held.json()["events"] == [] and queries.of_this_thread() == []
    )
    assert_error(get(path, f"?cursor={cursor}", signed), 401, "invalid_dpop_proof")
    clock[0] = NOW + 3600 * 24  # past the token's expiry
    assert_error(get(path, f"?cursor={cursor}"), 401, "invalid_token")
    dpop.reset()
