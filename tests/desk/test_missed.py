"""No customer lost: a customer who asked for a person and got nobody (no one available,
timed out, given back) is on the desk's *missed* list with why and when, signalled for the
company's own channel, until someone follows them up (a reply into the conversation, or
"followed up elsewhere"); a handoff about to go back is shown so before it does."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from poppy_django import service, signals
from poppy_django.engine import recovery
from poppy_django.models import (
    Conversation,
    DeskEvent,
    DeskEventKind,
    HandoffOutcome,
    HandoffRecord,
)
from tests.agents import PersonalAgent
from tests.desk.conftest import DESK, act, make_user, queued
from tests.staff import staff_says
from tests.wire.wire_support import quiet_start

pytestmark = pytest.mark.django_db(transaction=True)


def missed_rows(client: Client) -> str:
    response = client.get(DESK, {"status": "missed", "partial": "rows"})
    assert response.status_code == 200
    return response.content.decode()


def waited(conversation_id: str, seconds: float) -> None:
    Conversation.objects.filter(pk=conversation_id).update(
        handoff_requested_at=timezone.now() - timedelta(seconds=seconds)
    )


@pytest.fixture
def told() -> Any:
    """What the ``handoff_missed`` signal said (the company's own channel)."""
    heard: list[dict[str, Any]] = []

    def receive(**kwargs: Any) -> None:
        heard.append({k: v for k, v in kwargs.items() if k not in ("signal", "sender")})

    signals.handoff_missed.connect(receive)
    yield heard
    signals.handoff_missed.disconnect(receive)


def test_a_timed_out_handoff_is_missed_with_why_and_when_until_a_reply_follows_it_up(
    desk: Client, told: list[dict[str, Any]]
) -> None:
    customer = PersonalAgent(account_id="acct-9")
    conversation_id = queued(customer, "Can someone call me about my order?")
    assert conversation_id not in missed_rows(desk)
    # Past HANDOFF_WARN_AT of the maximum wait, the queue says when it goes back.
    waited(conversation_id, 500)
    row = desk.get(DESK, {"partial": "rows"}).content.decode()
    assert "goes back to the Company Agent at" in row
    waited(conversation_id, 601)
    recovery.sweep()
    rows = missed_rows(desk)
    assert conversation_id in rows
    assert "Missed: Timed out: no one joined in time (it waited for sam)" in rows
    assert told == [
        {
            "conversation_id": conversation_id,
            "outcome": "missed",
            "reason": "timed_out",
            "staff": "sam",
            "team": "",
            "account_id": "acct-9",
        }
    ]
    state = desk.get(f"{DESK}{conversation_id}/events.json").json()["conversation"]
    assert state["missed"].startswith("Timed out")
    assert service.missed().filter(pk=conversation_id).exists()
    # Later, Sam writes to the customer from the desk: that is the follow-up.
    staff_says(conversation_id, "Sorry we missed you: I can help now.")
    assert conversation_id not in missed_rows(desk)
    record = HandoffRecord.objects.get(conversation_id=conversation_id, outcome="missed")
    assert record.followed_up_by == "sam" and record.followed_up_at is not None


def test_no_one_available_and_given_back_are_missed_too(
    desk: Client, told: list[dict[str, Any]]
) -> None:
    nobody = PersonalAgent()
    conversation_id = quiet_start(nobody)
    service.set_away("sam", True)  # no one takes handoffs
    assert nobody.post(f"/{conversation_id}/handoff", {}).status_code == 202  # told why
    service.set_away("sam", False)
    given_back = queued(PersonalAgent(), "help")
    service.human_left(given_back, by="sam")  # it waited for sam, who gives it back
    rows = missed_rows(desk)
    assert "Missed: No one available: no one from our team is available." in rows
    assert "Missed: Given back by sam" in rows
    assert [(t["outcome"], t["reason"]) for t in told] == [
        ("unavailable", "no one from our team is available."),
        ("unavailable", "given back"),
    ]
    assert desk.get(DESK).content.decode().count('data-filter="missed"') == 1


def test_followed_up_elsewhere_takes_it_off_the_list_closed_or_not(desk: Client) -> None:
    conversation_id = queued(PersonalAgent(), "anyone?")
    waited(conversation_id, 601)
    recovery.sweep()
    service.close(conversation_id, by="sam")  # the customer is still owed an answer
    assert conversation_id in missed_rows(desk)
    answer = act(desk, conversation_id, "followed_up", note="E-mailed them the tracking link")
    assert answer.status_code == 200, answer.content
    assert conversation_id not in missed_rows(desk)
    event = DeskEvent.objects.get(conversation_id=conversation_id, kind=DeskEventKind.FOLLOWED_UP)
    assert (event.by, event.text) == ("sam", "E-mailed them the tracking link")
    # Nothing left to follow up: refused, nothing written.
    again = act(desk, conversation_id, "followed_up")
    assert again.status_code == 409 and again.json()["error"] == "not_missed"
    assert DeskEvent.objects.filter(kind=DeskEventKind.FOLLOWED_UP).count() == 1
    bad = act(desk, conversation_id, "followed_up", note=["not", "text"])
    assert bad.status_code == 400
    # The record keeps its outcome for the reports.
    assert HandoffRecord.objects.get(conversation_id=conversation_id).outcome == (
        HandoffOutcome.MISSED
    )


def test_the_missed_list_is_for_desk_staff_only(agent: PersonalAgent) -> None:
    make_user(name="sam")
    outsider = Client()
    outsider.force_login(make_user(name="olga", desk=False))
    assert outsider.get(DESK, {"status": "missed"}).status_code in (302, 403)
    refused = outsider.post(
        f"{DESK}cnv_x/action/followed_up/",
        json.dumps({"request_id": "r"}),
        content_type="application/json",
    )
    assert refused.status_code in (302, 403)
