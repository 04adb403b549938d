"""The queue's fair order across personal agents (issue 51, R2): each agent's longest-waiting
handoff before any agent's next, in the queue, the alerts and *next waiting* alike."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from poppy_django.models import Conversation, Status
from tests.desk.conftest import DESK

pytestmark = pytest.mark.django_db


def waiting(client_id: str, minutes_ago: int) -> str:
    """A conversation of ``client_id`` waiting for a person since ``minutes_ago``."""
    return Conversation.objects.create(
        client_id=client_id,
        user_id=f"u-{client_id}-{minutes_ago}",
        agent_name="support",
        status=Status.QUEUED,
        handoff_requested_at=timezone.now() - timedelta(minutes=minutes_ago),
    ).id


def test_each_agents_first_handoff_waits_ahead_of_any_agents_next(desk: Client) -> None:
    flood = [waiting("https://flood.example/a", minutes) for minutes in (50, 40, 30, 20)]
    other = waiting("https://other.example/a", 45)
    real = waiting("https://real.example/a", 10)
    idle = Conversation.objects.create(
        client_id="https://real.example/a", user_id="u", agent_name="support"
    ).id
    expected = [flood[0], other, real, flood[1], flood[2], flood[3]]

    alerts = desk.get(f"{DESK}alerts.json").json()
    assert [item["id"] for item in alerts["conversations"]] == expected
    rows = desk.get(DESK, {"partial": "rows"}).content.decode()
    shown = list(dict.fromkeys(re.findall(r"cnv_[0-9a-f]+", rows)))
    assert shown == [*expected, idle]  # then the rest, by activity
