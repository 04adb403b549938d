"""Waiting handoffs bounded per User and per personal agent (issue 51, R2), through the
endpoint: past a bound the wire's ``429 too_many_requests`` with ``Retry-After``, nothing
recorded; concurrent requests of one client count one after the other. The example project
as shipped is flooded in ``tests/multiprocess/test_hostile_desk.py``."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from poppy_django.models import Conversation, Status
from tests.agents import PersonalAgent
from tests.wire.wire_support import assert_error, poppy, quiet_start

pytestmark = pytest.mark.django_db(transaction=True)

HERE = "tests.wire.test_handoff_bounds"


def queued(**kwargs: Any) -> str:
    """A request hook that queues every handoff (someone is always at the desk)."""
    return "queued"


def bounded(per_user: int | None, per_client: int | None) -> Any:
    return poppy(
        HANDOFF_HOOKS={"request": f"{HERE}.queued"},
        MAX_WAITING_HANDOFFS_PER_USER=per_user,
        MAX_WAITING_HANDOFFS_PER_CLIENT=per_client,
        THROTTLE_RATES={},
    )


def hand_off(agent: PersonalAgent) -> Any:
    return agent.post(f"/{quiet_start(agent)}/handoff", {})


def test_waiting_handoffs_are_bounded_per_user_and_per_client() -> None:
    client = "https://flood.example/agent"
    first, second = PersonalAgent(client_id=client), PersonalAgent(client_id=client)
    with bounded(per_user=1, per_client=2):
        assert hand_off(first).json()["status"] == "queued"
        refused = hand_off(first)
        assert_error(refused, 429, "too_many_requests")
        assert int(refused["Retry-After"]) > 0
        assert hand_off(second).json()["status"] == "queued"
        assert_error(hand_off(PersonalAgent(client_id=client)), 429, "too_many_requests")
        # Another personal agent is not charged for this one's handoffs.
        assert hand_off(PersonalAgent(client_id="https://real.example/agent")).status_code == 202
    assert Conversation.objects.filter(status=Status.QUEUED).count() == 3
    # Asking again in a waiting conversation adds nothing, and is not refused.
    waiting = Conversation.objects.filter(status=Status.QUEUED, client_id=client).first()
    assert waiting is not None
    with bounded(per_user=1, per_client=2):
        again = PersonalAgent(client_id=client, user_id=waiting.user_id)
        assert again.post(f"/{waiting.id}/handoff", {}).json()["status"] == "queued"


def test_concurrent_handoffs_of_one_client_stay_within_its_bound() -> None:
    client, bound, agents = "https://burst.example/agent", 3, 8
    flooders = [PersonalAgent(client_id=client) for _ in range(agents)]
    started = [quiet_start(agent) for agent in flooders]
    at_once = threading.Barrier(agents)
    statuses: list[int] = []

    def ask(agent: PersonalAgent, conversation_id: str) -> None:
        try:
            at_once.wait(timeout=30)
            statuses.append(agent.post(f"/{conversation_id}/handoff", {}).status_code)
        finally:
            connection.close()

    with bounded(per_user=None, per_client=bound):
        threads = [
            threading.Thread(target=ask, args=pair) for pair in zip(flooders, started, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert sorted(statuses) == [202] * bound + [429] * (agents - bound)
    assert Conversation.objects.filter(status=Status.QUEUED).count() == bound
