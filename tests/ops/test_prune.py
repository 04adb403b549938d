"""``poppy_prune_events``: batched deletes next to live traffic, then ``cursor_expired``."""

from __future__ import annotations

import threading
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from poppy_django.engine.maintenance import parse_duration, prune_by_retention
from poppy_django.models import Event
from tests.agents import PersonalAgent
from tests.staff import company_message
from tests.turn_control import dispatch_lost

pytestmark = pytest.mark.django_db(transaction=True)


def _aged_conversation(pa: PersonalAgent, replies: int) -> str:
    """A conversation with ``replies`` company messages, all made to look two days old."""
    conversation_id = pa.start("hello").json()["conversation_id"]
    pa.settled(conversation_id)
    for n in range(replies):
        company_message(conversation_id, f"note {n}")
    Event.objects.filter(conversation_id=conversation_id).update(
        created_at=timezone.now() - timedelta(days=2)
    )
    return conversation_id


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30d", 30 * 86400), ("2h", 7200), ("15m", 900), ("0s", 0), ("1d12h", 129600)],
)
def test_durations(text, seconds):
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("bad", ["", "30", "d", "-1d", "3x", "1.5h"])
def test_a_bad_duration_is_a_command_error(bad):
    with pytest.raises(CommandError):
        call_command("poppy_prune_events", "--older-than", bad)


def test_dry_run_counts_and_deletes_nothing(agent: PersonalAgent):
    conversation_id = _aged_conversation(agent, replies=3)
    total = Event.objects.filter(conversation_id=conversation_id).count()
    out = StringIO()
    call_command("poppy_prune_events", "--older-than", "1d", "--dry-run", stdout=out)
    assert f"would delete {total} event(s) in 1 conversation(s)" in out.getvalue()
    assert Event.objects.filter(conversation_id=conversation_id).count() == total


def test_prune_during_traffic_then_cursors_into_pruned_events_expire(agent: PersonalAgent):
    old = _aged_conversation(agent, replies=40)
    old_events = agent.read(old).json()["events"]
    busy = agent.start("I keep talking").json()["conversation_id"]
    failures: list[str] = []
    stop = threading.Event()

    def traffic() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            sent = agent.send(busy, f"message {n}")
            read = agent.read(old)
            if sent.status_code != 202 or read.status_code != 200:
                failures.append(f"{sent.status_code} {read.status_code}")

    worker = threading.Thread(target=traffic)
    worker.start()
    try:
        out = StringIO()
        call_command(
            "poppy_prune_events", "--older-than", "1d", "--batch-size", "7", "-v", "2", stdout=out
        )
    finally:
        stop.set()
        worker.join()
    assert failures == []
    assert f"deleted {len(old_events)} event(s)" in out.getvalue()
    assert "conversation(s), deleted" in out.getvalue()  # progress lines
    assert not Event.objects.filter(conversation_id=old).exists()
    assert Event.objects.filter(conversation_id=busy).exists()  # recent: kept

    expired = agent.read(old, f"?cursor={old_events[5]['id']}")
    assert expired.status_code == 410 and expired.json()["error"] == "cursor_expired"
    # From the beginning: what is left (here nothing yet), then new events as usual.
    assert agent.read(old).json()["events"] == []
    company_message(old, "still here")
    fresh = agent.read(old).json()["events"]
    assert [e["message"]["text"] for e in fresh] == ["still here"]
    assert agent.read(old, f"?cursor={fresh[0]['id']}").status_code == 200


def test_unanswered_user_messages_are_kept(agent: PersonalAgent):
    conversation_id = _aged_conversation(agent, replies=2)
    with dispatch_lost():
        agent.send(conversation_id, "please answer me")
    Event.objects.filter(conversation_id=conversation_id).update(
        created_at=timezone.now() - timedelta(days=2)
    )
    call_command("poppy_prune_events", "--older-than", "1d", stdout=StringIO())
    left = agent.read(conversation_id).json()["events"]
    assert left[0]["message"]["text"] == "please answer me"


def test_the_beat_task_prunes_past_the_retention_setting(agent: PersonalAgent, settings):
    conversation_id = _aged_conversation(agent, replies=1)
    settings.POPPY = {**settings.POPPY, "RETENTION_SECONDS": None}
    assert prune_by_retention() is None
    assert Event.objects.filter(conversation_id=conversation_id).exists()
    settings.POPPY = {**settings.POPPY, "RETENTION_SECONDS": 86400}
    report = prune_by_retention()
    assert report is not None and report.events > 0
    assert not Event.objects.filter(conversation_id=conversation_id).exists()
