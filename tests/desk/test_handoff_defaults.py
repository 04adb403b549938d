"""The default hooks: a handoff is queued only when someone can take it (presence, office
hours), goes to one of them (round robin), and never waits for ever; the signal a project
wires to e-mail, tried with Django's own e-mail backend."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.test import override_settings
from django.utils import timezone

from poppy_django import handoff, service, signals
from poppy_django.conf import DEFAULT_TEXTS
from poppy_django.engine import recovery
from poppy_django.models import CannedReply, Conversation, StaffPresence
from poppy_django.staff import office_hours
from tests.agents import PersonalAgent, kinds, messages
from tests.desk.conftest import make_user, on_shift
from tests.wire.wire_support import poppy, quiet_start

pytestmark = pytest.mark.django_db(transaction=True)


def ask(agent: PersonalAgent, conversation_id: str) -> dict[str, Any]:
    response = agent.post(f"/{conversation_id}/handoff", {})
    assert response.status_code == 202, response.content
    return response.json()


def told(agent: PersonalAgent, conversation_id: str) -> tuple[list, str]:
    events = agent.read(conversation_id).json()["events"]
    return kinds(events), messages(events)[-1].get("text", "")


def test_with_no_one_on_the_desk_the_personal_agent_is_told_so(agent: PersonalAgent) -> None:
    make_user(name="sam")  # on the team, but no desk page of theirs is open
    conversation_id = quiet_start(agent)
    answer = ask(agent, conversation_id)
    assert (answer["status"], answer["responder"]) == ("idle", "agent")
    events, text = told(agent, conversation_id)
    assert events[-3:] == [
        ("state", "queued", "agent"),
        ("message", "company"),
        ("state", "idle", "agent"),
    ]
    assert text == DEFAULT_TEXTS["handoff_unavailable"].format(
        reason=DEFAULT_TEXTS["no_staff_available"]
    )


def test_someone_away_or_gone_quiet_is_not_available(agent: PersonalAgent) -> None:
    on_shift("sam")
    service.set_away("sam", True)
    assert service.available_staff() == []
    service.set_away("sam", False)
    assert service.available_staff() == ["sam"]
    StaffPresence.objects.update(last_seen_at=timezone.now() - timedelta(seconds=91))
    assert service.available_staff() == [] and not service.staff_status("sam").available
    conversation_id = quiet_start(agent)
    assert ask(agent, conversation_id)["status"] == "idle"


def test_staff_without_the_desk_permission_are_never_available() -> None:
    make_user(name="visitor", desk=False)
    with pytest.raises(Exception) as caught:
        service.staff_seen("visitor")
    assert getattr(caught.value, "code", None) == "unknown_staff"
    assert StaffPresence.objects.count() == 0


def test_outside_office_hours_the_reason_names_the_hours(agent: PersonalAgent) -> None:
    on_shift("sam")
    today = timezone.now().date().isoformat()
    hours = {"TIME_ZONE": "UTC", "HOURS": {"mon-sun": "00:00-24:00"}, "CLOSED_DATES": [today]}
    conversation_id = quiet_start(agent)
    with poppy(OFFICE_HOURS=hours):
        assert not service.office_open()
        assert ask(agent, conversation_id)["status"] == "idle"
    _, text = told(agent, conversation_id)
    assert "mon-sun 00:00-24:00 (UTC)" in text
    assert text == DEFAULT_TEXTS["handoff_unavailable"].format(
        reason=DEFAULT_TEXTS["outside_office_hours"].format(hours="mon-sun 00:00-24:00 (UTC)")
    )


def test_office_hours_open_and_close_by_the_clock_of_their_zone() -> None:
    hours = office_hours.parse(
        {"TIME_ZONE": "Europe/Paris", "HOURS": {"mon-fri": "09:00-12:30, 13:30-18:00"}}
    )
    assert hours is not None
    from datetime import UTC, datetime

    # Friday 4 December 2026: Paris is UTC+1.
    assert hours.open_at(datetime(2026, 12, 4, 8, 0, tzinfo=UTC))  # 09:00 in Paris
    assert not hours.open_at(datetime(2026, 12, 4, 7, 59, tzinfo=UTC))
    assert not hours.open_at(datetime(2026, 12, 4, 11, 45, tzinfo=UTC))  # lunch
    assert not hours.open_at(datetime(2026, 12, 5, 10, 0, tzinfo=UTC))  # Saturday


def test_a_queued_handoff_goes_round_robin_among_those_available() -> None:
    on_shift("sam")
    on_shift("pat")
    given = []
    for _ in range(4):  # four customers (one User may have only two handoffs waiting)
        customer = PersonalAgent()
        conversation_id = quiet_start(customer)
        assert ask(customer, conversation_id)["status"] == "queued"
        given.append(Conversation.objects.get(pk=conversation_id).assignee)
    assert sorted(given[:2]) == ["pat", "sam"] and given[2:] == given[:2]


def test_round_robin_can_be_turned_off(agent: PersonalAgent) -> None:
    on_shift("sam")
    conversation_id = quiet_start(agent)
    with poppy(HANDOFF_HOOKS={"assign": None}):
        assert ask(agent, conversation_id)["status"] == "queued"
    assert service.get(conversation_id).assignee == ""
    assert list(service.unassigned().values_list("pk", flat=True)) == [conversation_id]


def test_a_handoff_past_its_maximum_wait_goes_back_with_its_reason(agent: PersonalAgent) -> None:
    on_shift("sam")
    timed_out: list[dict] = []

    def receive(**kwargs: Any) -> None:
        timed_out.append(kwargs)

    signals.handoff_timed_out.connect(receive)
    try:
        conversation_id = quiet_start(agent)
        assert ask(agent, conversation_id)["status"] == "queued"
        assert handoff.return_overdue() == []  # not yet
        Conversation.objects.filter(pk=conversation_id).update(
            handoff_requested_at=timezone.now() - timedelta(seconds=601)
        )
        recovery.sweep()  # what every worker runs every SWEEP_SECONDS
    finally:
        signals.handoff_timed_out.disconnect(receive)
    events, text = told(agent, conversation_id)
    assert events[-1] == ("state", "idle", "agent")
    assert text == DEFAULT_TEXTS["handoff_unavailable"].format(
        reason=DEFAULT_TEXTS["handoff_timed_out"]
    )
    assert service.get(conversation_id).assignee == ""
    assert [k["conversation_id"] for k in timed_out] == [conversation_id]
    assert handoff.return_overdue() == []  # once


def test_what_was_said_while_waiting_is_answered_once_back_with_the_agent(
    agent: PersonalAgent,
) -> None:
    on_shift("sam")
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    assert ask(agent, conversation_id)["status"] == "queued"
    agent.send(conversation_id, "is anyone there?")  # for the person: the agent stays out
    Conversation.objects.filter(pk=conversation_id).update(
        handoff_requested_at=timezone.now() - timedelta(seconds=601)
    )
    assert handoff.return_overdue() == [conversation_id]
    events = agent.events_until(
        conversation_id,
        lambda events: "You said: is anyone there?" in str(messages(events)[-1].get("text")),
    )
    said = [m.get("text") for m in messages(events) if m["role"] == "company"]
    assert said.count("You said: is anyone there?") == 1
    assert said[-2] == DEFAULT_TEXTS["handoff_unavailable"].format(
        reason=DEFAULT_TEXTS["handoff_timed_out"]
    )


def test_without_a_maximum_wait_a_handoff_waits(agent: PersonalAgent) -> None:
    on_shift("sam")
    conversation_id = quiet_start(agent)
    ask(agent, conversation_id)
    Conversation.objects.filter(pk=conversation_id).update(
        handoff_requested_at=timezone.now() - timedelta(days=2)
    )
    with poppy(HANDOFF_MAX_WAIT_SECONDS=None):
        assert handoff.return_overdue() == []
    assert service.get(conversation_id).status == "queued"


def email_the_team(*, conversation_id: str, assignee: str, **kwargs: Any) -> None:
    """The recipe of docs/signals.md."""
    from django.core.mail import send_mail

    send_mail(
        subject="A customer is waiting for a person",
        message=f"Conversation {conversation_id} waits on the desk (for {assignee or 'anyone'}).",
        from_email="desk@acme.example",
        recipient_list=["support@acme.example"],
    )


@override_settings(EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend")
def test_the_handoff_waiting_signal_sends_an_email_once_it_is_durable(
    agent: PersonalAgent,
) -> None:
    on_shift("sam")
    signals.handoff_waiting.connect(email_the_team)
    try:
        conversation_id = quiet_start(agent)
        assert ask(agent, conversation_id)["status"] == "queued"
        nobody = quiet_start(agent)
        service.set_away("sam", True)
        assert ask(agent, nobody)["status"] == "idle"  # unavailable: no e-mail
    finally:
        signals.handoff_waiting.disconnect(email_the_team)
    (sent,) = mail.outbox
    assert sent.to == ["support@acme.example"]
    assert conversation_id in sent.body and "for sam" in sent.body


def test_the_company_agent_hands_off_with_its_reason(agent: PersonalAgent) -> None:
    on_shift("sam")
    conversation_id = quiet_start(agent)
    assert service.hand_off(conversation_id, reason="a refund over 500 EUR") == "queued"
    state = service.get(conversation_id)
    assert (state.handoff_initiator, state.handoff_reason) == (
        "company_agent",
        "a refund over 500 EUR",
    )
    raw = agent.read(conversation_id).content.decode()
    assert "500 EUR" not in raw and "sam" not in raw


def test_canned_replies_fill_in_what_is_known(agent: PersonalAgent) -> None:
    CannedReply.objects.create(
        shortcut="where", title="Where is it", text="Hi {name|there}, {order} is on its way."
    )
    known = quiet_start(agent, user_name="Ada", order_id="A-1")
    unknown = quiet_start(PersonalAgent())
    assert service.canned_reply(known, "where").text == "Hi Ada, A-1 is on its way."
    assert service.canned_reply(unknown, "where").text == "Hi there,  is on its way."
    assert [r.shortcut for r in service.canned_replies(known)] == ["where"]
    with pytest.raises(Exception) as caught:
        service.canned_reply(known, "nope")
    assert getattr(caught.value, "code", None) == "not_found"
