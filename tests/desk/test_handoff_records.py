"""The record of each request for a person and what came of it (what the team's reports
count), written with the change it records."""

from __future__ import annotations

import pytest
from django.test import override_settings

from poppy_django import handoff, service
from poppy_django.models import Conversation, HandoffOutcome, HandoffRecord
from tests.agents import PersonalAgent
from tests.desk.conftest import on_shift, queued

pytestmark = pytest.mark.django_db(transaction=True)


def record_of(conversation_id: str) -> HandoffRecord:
    return HandoffRecord.objects.filter(conversation_id=conversation_id).latest("requested_at")


def test_joined_answered_and_given_back(agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    waiting = record_of(conversation_id)
    assert (waiting.outcome, waiting.initiator, waiting.staff) == (
        "waiting",
        "personal_agent",
        "sam",
    )
    on_shift("bob")
    service.human_joined(conversation_id, by="bob", take_over=True)
    seen = service.get(conversation_id).last_event_id
    service.post_message(conversation_id, "Hi, Bob here.", by="bob", seen=seen)
    seen = service.get(conversation_id).last_event_id
    service.post_message(conversation_id, "Anything else?", by="bob", seen=seen)
    service.human_left(conversation_id, by="bob")
    done = record_of(conversation_id)
    assert (done.outcome, done.staff, done.first_response_by) == ("joined", "bob", "bob")
    assert done.requested_at <= done.outcome_at <= done.first_response_at <= done.ended_at
    assert HandoffRecord.objects.filter(conversation_id=conversation_id).count() == 1


def test_a_person_joining_unasked_is_recorded_as_staff_initiated(agent: PersonalAgent) -> None:
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    seen = service.get(conversation_id).last_event_id
    service.post_message(conversation_id, "Hello from a person", by="sam", seen=seen)
    service.close(conversation_id, by="sam")
    record = record_of(conversation_id)
    assert (record.initiator, record.outcome, record.staff) == ("staff", "joined", "sam")
    assert record.first_response_at and record.ended_at


def test_unavailable_at_once_when_nobody_is_on_shift(agent: PersonalAgent) -> None:
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    assert agent.post(f"/{conversation_id}/handoff", {}).json()["status"] != "queued"
    record = record_of(conversation_id)
    assert record.outcome == HandoffOutcome.UNAVAILABLE and record.outcome_at
    assert record.reason == "no one from our team is available."


def test_a_staff_members_unavailable_is_theirs(agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    service.handoff_unavailable(conversation_id, "we are in a meeting", by="sam")
    record = record_of(conversation_id)
    assert (record.outcome, record.staff, record.reason) == (
        "unavailable",
        "sam",
        "we are in a meeting",
    )


def test_timed_out_is_missed_for_whom_it_waited(agent: PersonalAgent, settings) -> None:
    conversation_id = queued(agent)
    with override_settings(POPPY={**settings.POPPY, "HANDOFF_MAX_WAIT_SECONDS": 0}):
        assert handoff.return_overdue() == [conversation_id]
    record = record_of(conversation_id)
    assert (record.outcome, record.staff, record.reason) == ("missed", "sam", "timed_out")


def test_closed_while_waiting_is_cancelled(agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    agent.post(f"/{conversation_id}/close", {})
    assert record_of(conversation_id).outcome == HandoffOutcome.CANCELLED
    assert Conversation.objects.get(pk=conversation_id).status == "closed"
