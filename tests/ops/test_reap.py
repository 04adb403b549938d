"""Conversations left working by a dead writer are taken up again, once: by the process's own
recovery sweep (no extra process), or by ``poppy_reap`` where the sweep is turned off.
"""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from poppy_django.engine.maintenance import orphaned_conversations
from poppy_django.models import Conversation
from tests.agents import PersonalAgent, messages
from tests.turn_control import dispatch_lost

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]


@pytest.fixture
def no_sweep(settings) -> None:
    """A deployment that turned the in-process recovery off (it then schedules poppy_reap)."""
    settings.POPPY = {**settings.POPPY, "SWEEP_SECONDS": None}


def _stranded(pa: PersonalAgent, text: str) -> str:
    """A conversation whose message was recorded but never dispatched."""
    conversation_id = pa.start("hello").json()["conversation_id"]
    pa.settled(conversation_id)
    with dispatch_lost():
        pa.send(conversation_id, text)
    return conversation_id


def test_only_conversations_whose_writer_is_gone_are_orphaned(agent: PersonalAgent, no_sweep):
    expired = _stranded(agent, "expired lease")
    Conversation.objects.filter(pk=expired).update(
        lease_owner="dead", lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    live = _stranded(agent, "live lease")
    Conversation.objects.filter(pk=live).update(
        lease_owner="alive", lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    just_posted = _stranded(agent, "dispatch may still be on its way")
    never_picked_up = _stranded(agent, "dispatch lost long ago")
    Conversation.objects.filter(pk=never_picked_up).update(
        updated_at=timezone.now() - timedelta(minutes=5)
    )
    idle = agent.start("done").json()["conversation_id"]
    agent.settled(idle)

    assert sorted(orphaned_conversations()) == sorted([expired, never_picked_up])
    assert just_posted not in orphaned_conversations() and live not in orphaned_conversations()


def test_the_command_redispatches_and_is_idempotent(agent: PersonalAgent, no_sweep):
    conversation_id = _stranded(agent, "anyone?")
    Conversation.objects.filter(pk=conversation_id).update(
        lease_owner="dead", lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    out = StringIO()
    call_command("poppy_reap", stdout=out)
    assert f"re-dispatched {conversation_id}" in out.getvalue()
    events = agent.settled(conversation_id)
    replies = [m["text"] for m in messages(events) if m["role"] == "company"]
    assert replies == ["You said: hello", "You said: anyone?"]

    again = StringIO()
    call_command("poppy_reap", stdout=again)
    assert "0 conversation(s) re-dispatched" in again.getvalue()
    assert [m["text"] for m in messages(agent.read(conversation_id).json()["events"])].count(
        "You said: anyone?"
    ) == 1


def test_the_process_takes_up_a_dead_writers_turn_by_itself(agent: PersonalAgent, settings):
    settings.POPPY = {**settings.POPPY, "SWEEP_SECONDS": 0.2}
    conversation_id = _stranded(agent, "anyone there?")
    Conversation.objects.filter(pk=conversation_id).update(
        lease_owner="dead", lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    events = agent.settled(conversation_id)  # no reaper: only this process's sweep
    replies = [m["text"] for m in messages(events) if m["role"] == "company"]
    assert replies == ["You said: hello", "You said: anyone there?"]
    assert orphaned_conversations() == []


def test_an_approved_action_whose_dispatch_was_lost_is_run(acct1: PersonalAgent, settings):
    from poppy_django.desk import decisions
    from poppy_django.models import ActionRecord, ActionStatus

    settings.POPPY = {
        **settings.POPPY,
        "SWEEP_SECONDS": 0.2,
        "LEASE_SECONDS": 1.0,
        "HEARTBEAT_SECONDS": 0.3,
    }
    conversation_id = acct1.start("hello").json()["conversation_id"]
    acct1.settled(conversation_id)
    record = ActionRecord.objects.create(
        conversation_id=conversation_id,
        call_key="k1",
        tool="cancel_order",
        arguments={"order_id": "A-2"},
        summary="Cancel order A-2",
        actor_id="acct-1",
        account_id="acct-1",
        roles=["personal_agent", "scope:poppy:write"],
        status=ActionStatus.AWAITING_APPROVAL,
    )
    with dispatch_lost():
        decisions.approve(record.pk, by="sam", request_id="req-lost-dispatch")
    # Not dispatched: taken up once no one claimed it for a lease's time.
    events = acct1.events_until(
        conversation_id, lambda evs: messages(evs)[-1]["text"] == "Done: Cancel order A-2."
    )
    assert len(messages(events)) == 3
    record.refresh_from_db()
    assert record.status == ActionStatus.SUCCEEDED
