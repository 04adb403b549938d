"""The desk's pages stay bounded: counted in one query, a transcript page at a time, and a
desk action done once however often it is sent at once."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from poppy_django import service
from poppy_django.desk import queue, transcript
from poppy_django.models import ActionRecord, ActionStatus, Conversation, Event
from tests.agents import PersonalAgent
from tests.desk.conftest import DESK, act, desk_url, new_request_id, queued
from tests.staff import staff_says

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_queue_counts_every_filter_in_one_query(
    desk: Client, agent: PersonalAgent, django_assert_num_queries
) -> None:
    waiting = queued(agent)
    other = agent.start("hi").json()["conversation_id"]
    agent.settled(other)
    service.close(other, by="sam")
    ActionRecord.objects.create(
        conversation_id=waiting,
        call_key="k1",
        actor_id="acct-1",
        tool="cancel_order",
        arguments={},
        status=ActionStatus.AWAITING_APPROVAL,
    )
    ActionRecord.objects.create(
        conversation_id=waiting,
        call_key="k2",
        actor_id="acct-1",
        tool="cancel_order",
        arguments={},
        status=ActionStatus.AWAITING_APPROVAL,
    )
    expected = {
        item.key: Conversation.objects.filter(item.condition("sam")).distinct().count()
        for item in queue.FILTERS
    }
    with django_assert_num_queries(1):
        counted = queue.counts("sam")
    assert counted == expected
    assert counted["approvals"] == 1 and counted["waiting"] == 1 and counted["closed"] == 1
    # Sam's own: the assign hook gave the waiting one to sam, the only one on shift.
    assert counted["mine"] == 1 and counted["unassigned"] == 0
    assert queue.counts("bob")["mine"] == 0
    assert desk.get(DESK).status_code == 200


def test_the_conversation_page_shows_one_page_of_events_with_links(
    desk: Client, agent: PersonalAgent, monkeypatch
) -> None:
    monkeypatch.setattr(transcript, "EVENTS_PAGE", 3)
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    for n in range(4):
        staff_says(conversation_id, f"note {n}", by="sam")
    seqs = list(
        Event.objects.filter(conversation_id=conversation_id)
        .order_by("seq")
        .values_list("seq", flat=True)
    )
    assert len(seqs) > 6

    latest = desk.get(desk_url(conversation_id)).content.decode()
    assert latest.count("data-seq=") == 3
    assert "note 3" in latest and "note 0" not in latest
    assert f"?before={seqs[-3]}" in latest and "the latest page" not in latest

    earlier = desk.get(desk_url(conversation_id) + f"?before={seqs[-3]}").content.decode()
    assert "note 0" in earlier and "note 3" not in earlier
    assert "the latest page" in earlier

    # A link to an old event opens the page that holds it.
    first = Event.objects.get(conversation_id=conversation_id, seq=seqs[0]).to_wire()["id"]
    linked = desk.get(desk_url(conversation_id) + f"?event={first}").content.decode()
    assert first in linked and "the latest page" in linked


def test_one_request_sent_twice_at_once_is_done_once(agent: PersonalAgent) -> None:
    conversation_id = queued(agent, staff="pat")  # the round robin gives it to pat
    users: list[User] = [User.objects.get(username="pat")]
    request_id = new_request_id()
    answers = []
    start = threading.Barrier(2)

    def send() -> None:
        client = Client()
        client.force_login(users[0])
        start.wait()
        answers.append(act(client, conversation_id, "reply", request_id, text="once only"))
        connection.close()

    senders = [threading.Thread(target=send) for _ in range(2)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    assert sorted(a.status_code for a in answers) == [200, 200]
    assert sorted(a.json()["replayed"] for a in answers) == [False, True]
    texts = [
        e.payload["message"].get("text")
        for e in Event.objects.filter(conversation_id=conversation_id, type="message")
    ]
    assert texts.count("once only") == 1
