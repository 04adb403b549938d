"""Moments: structured log lines with conversation, turn and request ids, and signals."""

from __future__ import annotations

import logging

import pytest
from django.dispatch import receiver

from poppy_django import signals
from tests.agents import PersonalAgent
from tests.waiting import eventually

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]


def _records(caplog: pytest.LogCaptureFixture, moment: str) -> list[dict]:
    return [r.poppy for r in caplog.records if getattr(r, "poppy", {}).get("moment") == moment]


def test_request_ids_are_echoed_and_logged(agent: PersonalAgent, caplog):
    caplog.set_level(logging.INFO, logger="poppy_django")
    body = {"message": {"id": "traced", "sender": "agent", "text": "hello"}}
    response = agent.post("", body, HTTP_X_REQUEST_ID="trace-42")
    assert response["X-Request-ID"] == "trace-42"
    (started,) = _records(caplog, "conversation_started")
    assert started["request_id"] == "trace-42"
    assert started["conversation_id"] == response.json()["conversation_id"]

    made_up = agent.read(response.json()["conversation_id"], HTTP_X_REQUEST_ID="not an id!")
    assert made_up["X-Request-ID"].startswith("req_")
    refused = PersonalAgent().client.get("/poppy/conversations/x/events")
    assert refused.status_code == 401 and refused["X-Request-ID"].startswith("req_")


def test_logs_never_carry_what_the_user_wrote(agent: PersonalAgent, caplog):
    caplog.set_level(logging.DEBUG, logger="poppy_django")
    conversation_id = agent.start("my secret is swordfish").json()["conversation_id"]
    agent.settled(conversation_id)
    assert "swordfish" not in caplog.text
    assert _records(caplog, "message_received")[0]["message_id"]


def test_turn_moments_name_the_messages_they_answer(agent: PersonalAgent, caplog):
    caplog.set_level(logging.INFO, logger="poppy_django")
    seen: list[dict] = []

    @receiver(signals.turn_started, weak=False)
    def remember(**kwargs):
        seen.append(kwargs)

    try:
        conversation_id = agent.start("hello", id="first-message").json()["conversation_id"]
        agent.settled(conversation_id)
    finally:
        signals.turn_started.disconnect(remember)
    assert seen[0]["message_ids"] == ["first-message"]
    assert seen[0]["conversation_id"] == conversation_id
    # Logged by the turn's thread once its reply commits: it may come just after the reader
    # sees the conversation settle.
    (finished,) = eventually(lambda: _records(caplog, "turn_finished"), what="turn_finished")
    assert finished["turn_id"] == seen[0]["turn_id"] and finished["duration"] >= 0


def test_rejected_actions_are_announced(acct1: PersonalAgent, settings):
    settings.POPPY = {**settings.POPPY, "ACTIONS": "reject"}
    seen: list[dict] = []

    @receiver(signals.action_executed, weak=False)
    def remember(**kwargs):
        seen.append(kwargs)

    try:
        conversation_id = acct1.start("cancel A-2").json()["conversation_id"]
        acct1.settled(conversation_id)
    finally:
        signals.action_executed.disconnect(remember)
    assert [(s["tool"], s["status"]) for s in seen] == [("cancel_order", "rejected")]
