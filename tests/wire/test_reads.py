"""JSON reads: shape, pages of 100, cursors, invalid/expired cursors, and long-poll ``wait``."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

import pytest
from django.db import connection

from poppy_django import service
from poppy_django.fanout.listening import waiting_readers
from poppy_django.models import Event
from poppy_django.store import event_log
from tests.agents import PersonalAgent
from tests.desk.conftest import on_shift
from tests.staff import company_message
from tests.waiting import eventually
from tests.wire.wire_support import (
    ID_RE,
    READ_KEYS,
    RESPONDERS,
    STATUSES,
    add_company_messages,
    assert_error,
    poppy,
    quiet_start,
    rows,
)

pytestmark = pytest.mark.django_db(transaction=True)


def read_all(agent: PersonalAgent, conversation_id: str) -> list[dict]:
    events, cursor = [], None
    while True:
        page = agent.read(conversation_id, f"?cursor={cursor}" if cursor else "").json()
        events += page["events"]
        cursor = page["cursor"]
        if not page["has_more"]:
            return events


def check_read(body: dict, conversation_id: str) -> None:
    assert set(body) == READ_KEYS, body
    assert body["conversation_id"] == conversation_id
    assert isinstance(body["events"], list)
    assert isinstance(body["has_more"], bool)
    assert body["status"] in STATUSES and body["responder"] in RESPONDERS
    assert body["cursor"] is None or ID_RE.fullmatch(body["cursor"])
    for event in body["events"]:
        check_event(event)


def check_event(event: dict) -> None:
    assert ID_RE.fullmatch(event["id"]) and event["id"].startswith("evt_"), event["id"]
    assert "=" not in event["id"] and ":" not in event["id"]
    assert isinstance(event["type"], str)
    created = datetime.fromisoformat(event["created_at"].replace("Z", "+00:00"))
    assert created.tzinfo is not None and created.utcoffset() == timedelta(0), event
    if event["type"] == "state":
        assert event["status"] in STATUSES and event["responder"] in RESPONDERS


def test_a_read_has_every_key(agent):
    conversation_id = quiet_start(agent)
    response = agent.read(conversation_id)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    check_read(body, conversation_id)
    assert len(body["events"]) == 1
    assert body["cursor"] == body["events"][0]["id"]
    assert body["has_more"] is False
    assert (body["status"], body["responder"]) == ("idle", "agent")


def test_events_of_a_whole_conversation_keep_the_id_alphabet_and_utc_times(agent):
    started = agent.start("hours please")
    conversation_id = started.json()["conversation_id"]
    agent.settled(conversation_id)
    agent.post(f"/{conversation_id}/handoff")
    service.human_joined(conversation_id, by="sam")
    service.request_user(conversation_id, "Need you", by="sam")
    agent.post(f"/{conversation_id}/close")
    body = agent.read(conversation_id).json()
    check_read(body, conversation_id)
    events = body["events"]
    assert {"message", "state", "user_requested"} <= {e["type"] for e in events}
    assert len({e["id"] for e in events}) == len(events)


def test_pages_of_100_with_has_more_at_the_default_size(agent):
    conversation_id = quiet_start(agent)
    add_company_messages(conversation_id, 150)  # 151 events in all
    first = agent.read(conversation_id).json()
    assert len(first["events"]) == 100 and first["has_more"] is True
    assert first["cursor"] == first["events"][-1]["id"]
    second = agent.read(conversation_id, f"?cursor={first['cursor']}").json()
    assert len(second["events"]) == 51 and second["has_more"] is False
    assert second["cursor"] == second["events"][-1]["id"]
    ids = [e["id"] for e in first["events"] + second["events"]]
    assert len(set(ids)) == 151
    last = agent.read(conversation_id, f"?cursor={second['cursor']}").json()
    assert last["events"] == [] and last["cursor"] == second["cursor"]
    assert last["has_more"] is False


def test_small_pages_cover_everything_once_in_order(agent):
    conversation_id = quiet_start(agent)
    add_company_messages(conversation_id, 6)  # 7 events
    everything = agent.read(conversation_id).json()["events"]
    assert len(everything) == 7
    with poppy(PAGE_SIZE=3):
        pages, cursor = [], None
        while True:
            page = agent.read(conversation_id, f"?cursor={cursor}" if cursor else "").json()
            pages.append(page)
            cursor = page["cursor"]
            if not page["has_more"]:
                break
    assert [len(p["events"]) for p in pages] == [3, 3, 1]
    assert [e for p in pages for e in p["events"]] == everything
    assert all(p["cursor"] == p["events"][-1]["id"] for p in pages)


def test_has_more_is_false_when_the_last_page_is_exactly_full(agent):
    conversation_id = quiet_start(agent)
    add_company_messages(conversation_id, 2)
    with poppy(PAGE_SIZE=3):
        page = agent.read(conversation_id).json()
    assert len(page["events"]) == 3 and page["has_more"] is False


def test_a_read_with_nothing_new_returns_the_requests_cursor(agent):
    conversation_id = quiet_start(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    for query in (f"?cursor={cursor}", f"?cursor={cursor}&wait=0", f"?cursor={cursor}&wait=0.2"):
        body = agent.read(conversation_id, query).json()
        check_read(body, conversation_id)
        assert body["events"] == [] and body["cursor"] == cursor and body["has_more"] is False


def test_a_read_after_a_cursor_returns_only_later_events(agent):
    conversation_id = quiet_start(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    company_message(conversation_id, "later")
    body = agent.read(conversation_id, f"?cursor={cursor}").json()
    assert [e["message"]["text"] for e in body["events"]] == ["later"]
    assert body["events"][0]["message"]["role"] == "company"
    assert body["events"][0]["message"]["sender"] == "human"


def _bad_cursors(conversation_id: str, other_cursor: str) -> list[str]:
    key = conversation_id.removeprefix("cnv_")
    return [
        "abc",
        "evt_",
        "evt_x_1",
        f"evt_{key}_0",
        f"evt_{key}_01",
        f"evt_{key}_-1",
        f"evt_{key}_2",  # never issued: only one event so far
        f"evt_{key}_999999",
        f"evt_{key}_99999999999999999999999",
        f"evt_{key}_1:2",
        f"evt_{key}_1=",
        "é",
        "x" * 300,
        "",
        other_cursor,
    ]


def test_cursors_this_conversation_never_issued_are_invalid(agent):
    conversation_id = quiet_start(agent)
    other = quiet_start(agent)
    other_cursor = agent.read(other).json()["cursor"]
    before = rows()
    for cursor in _bad_cursors(conversation_id, other_cursor):
        for query in (f"?cursor={cursor}", f"?cursor={cursor}&wait=1"):
            assert_error(agent.read(conversation_id, query), 400, "invalid_cursor")
    # Before the stream opens, as JSON.
    response = agent.read(
        conversation_id, HTTP_ACCEPT="text/event-stream", HTTP_LAST_EVENT_ID="evt_nope_1"
    )
    assert_error(response, 400, "invalid_cursor")
    assert rows() == before


def test_a_cursor_into_pruned_events_is_expired(agent):
    conversation_id = quiet_start(agent)
    add_company_messages(conversation_id, 5)  # seq 1..6
    events = agent.read(conversation_id).json()["events"]
    # Retention pruned seq 1..3, as the product prunes: the cursors marked expired first.
    event_log.expire_before(conversation_id, 4)
    Event.objects.filter(conversation_id=conversation_id, seq__lt=4).delete()
    before = rows()
    for old in events[:2]:
        assert_error(agent.read(conversation_id, f"?cursor={old['id']}"), 410, "cursor_expired")
        assert_error(
            agent.read(conversation_id, f"?cursor={old['id']}&wait=1"), 410, "cursor_expired"
        )
    assert rows() == before
    # The client then reads from the beginning: what is left.
    fresh = agent.read(conversation_id).json()
    assert fresh["events"] == events[3:]
    # A cursor past the pruned range still works.
    later = agent.read(conversation_id, f"?cursor={events[4]['id']}").json()
    assert later["events"] == events[5:]
    # A cursor never issued stays invalid, not expired.
    key = conversation_id.removeprefix("cnv_")
    assert_error(agent.read(conversation_id, f"?cursor=evt_{key}_7"), 400, "invalid_cursor")


def test_a_wholly_pruned_conversation_reads_empty_with_a_cursor_that_reads_on(agent):
    """A read always names a cursor (personal agents require one): with every event pruned
    it is the last pruned event's, which misses nothing and is not expired."""
    conversation_id = quiet_start(agent)
    add_company_messages(conversation_id, 2)  # seq 1..3
    events = agent.read(conversation_id).json()["events"]
    event_log.expire_before(conversation_id, 4)
    Event.objects.filter(conversation_id=conversation_id).delete()
    fresh = agent.read(conversation_id).json()
    assert fresh["events"] == [] and fresh["cursor"] == events[-1]["id"]
    assert agent.read(conversation_id, f"?cursor={fresh['cursor']}").json()["events"] == []
    add_company_messages(conversation_id, 1)
    later = agent.read(conversation_id, f"?cursor={fresh['cursor']}").json()
    assert [e["id"] for e in later["events"]] != [] and later["cursor"] != fresh["cursor"]
    assert_error(agent.read(conversation_id, f"?cursor={events[1]['id']}"), 410, "cursor_expired")


@pytest.mark.parametrize(
    "wait", ["-1", "-0.5", "nan", "NaN", "inf", "-inf", "Infinity", "abc", "", "1e400", "0x10"]
)
def test_a_wait_that_is_not_a_non_negative_number_is_refused(agent, wait):
    conversation_id = quiet_start(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    before = rows()
    assert_error(agent.read(conversation_id, f"?wait={wait}"), 400, "invalid_request")
    assert_error(
        agent.read(conversation_id, f"?wait={wait}&cursor={cursor}"), 400, "invalid_request"
    )
    body = {"message": {"id": "w-1", "sender": "agent", "text": "hello"}}
    assert_error(agent.post(f"?wait={wait}", body), 400, "invalid_request")
    assert_error(
        agent.post(f"/{conversation_id}/messages?wait={wait}", body), 400, "invalid_request"
    )
    assert rows() == before


def test_a_fractional_wait_is_accepted(agent):
    conversation_id = quiet_start(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    response = agent.read(conversation_id, f"?cursor={cursor}&wait=0.25")
    assert response.status_code == 200
    assert response.json()["events"] == []


def test_wait_is_capped(agent):
    conversation_id = quiet_start(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    with poppy(WAIT_MAX_SECONDS=0.5):
        started = time.monotonic()
        response = agent.read(conversation_id, f"?cursor={cursor}&wait=1000000")
        elapsed = time.monotonic() - started
    assert response.status_code == 200
    assert response.json()["events"] == [] and response.json()["cursor"] == cursor
    assert elapsed < 15, elapsed  # generous: the cap is 0.5 s, the asked wait ~11 days


def test_a_wait_returns_at_once_when_events_are_ready(agent):
    conversation_id = quiet_start(agent)
    started = time.monotonic()
    body = agent.read(conversation_id, "?wait=25").json()
    assert len(body["events"]) == 1
    assert time.monotonic() - started < 15  # generous: far below the 25 s asked


def test_a_long_poll_wakes_when_an_event_arrives_from_another_thread(agent):
    conversation_id = quiet_start(agent)
    cursor = agent.read(conversation_id).json()["cursor"]

    def listening() -> bool:
        """The long-poll has subscribed and made its first read (which found nothing)."""
        return any(r.conversation_id == conversation_id and r.seen_seq for r in waiting_readers())

    def later() -> None:
        try:
            eventually(listening, what="the long-poll to listen")
            company_message(conversation_id, "woken")
        finally:
            connection.close()

    thread = threading.Thread(target=later)
    thread.start()
    try:
        # Below the fallback re-read interval: only a wake-up can answer in time.
        body = agent.read(conversation_id, f"?cursor={cursor}&wait=8").json()
    finally:
        thread.join()
    assert [e["message"]["text"] for e in body["events"]] == ["woken"]
    assert body["cursor"] == body["events"][0]["id"]


def test_status_and_responder_are_always_listed_values(agent):
    conversation_id = quiet_start(agent)
    seen = set()
    on_shift("sam")
    with poppy(HANDOFF_HOOKS={"request": "example_project.shop.desk.request_handoff"}):
        steps = [
            lambda: None,
            lambda: agent.post(f"/{conversation_id}/handoff"),
            lambda: service.human_joined(conversation_id, by="sam"),
            lambda: service.human_left(conversation_id, by="sam"),
            lambda: agent.post(f"/{conversation_id}/close"),
        ]
        for step in steps:
            step()
            body = agent.read(conversation_id).json()
            check_read(body, conversation_id)
            seen.add((body["status"], body["responder"]))
    assert seen == {("idle", "agent"), ("queued", "agent"), ("idle", "human"), ("closed", "agent")}


def test_a_response_is_at_most_one_mebibyte(agent):
    conversation_id = quiet_start(agent)
    for n in range(3):
        body = {"message": {"id": f"big-{n}", "sender": "agent", "context": {"p": "x" * 450_000}}}
        assert agent.post(f"/{conversation_id}/messages", body).status_code == 202
    response = agent.read(conversation_id)
    assert len(response.content) <= 1024 * 1024
    page = response.json()
    assert page["has_more"] is True
    assert len(read_all(agent, conversation_id)) == 4


def test_the_default_wait_cap_is_30_seconds():
    """Not waited out here (too slow): the cap an unconfigured project applies."""
    from poppy_django.conf import DEFAULTS, poppy_settings

    assert DEFAULTS["WAIT_MAX_SECONDS"] == 30
    assert poppy_settings.WAIT_MAX_SECONDS == 30
