"""A message that arrives while a live writer holds the conversation's lease is not
dispatched: that writer releases the lease only in a write that finds nothing left to
answer, under the row's lock, so its next turn answers the message. A lease that expired (its
writer died) does not count: the message is dispatched as always."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from poppy_django.engine import loop as engine
from poppy_django.engine.executors import ThreadExecutor
from poppy_django.models import Conversation
from poppy_django.store import lifecycle
from tests.agents import PersonalAgent, kinds
from tests.turn_control import dispatch_lost

pytestmark = pytest.mark.django_db(transaction=True)

#: The worker that holds the lease in these tests (another process, as far as this one knows).
WRITER = "worker-elsewhere"


@pytest.fixture
def dispatched(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The conversations dispatched (and nothing run: the test runs the turns)."""
    sent: list[str] = []
    monkeypatch.setattr(
        ThreadExecutor,
        "dispatch",
        classmethod(lambda cls, conversation_id: sent.append(conversation_id)),
    )
    yield sent


def answered_idle(agent: PersonalAgent) -> str:
    """A conversation whose first message is answered: idle, no lease held."""
    with dispatch_lost():
        conversation_id = agent.start("hello").json()["conversation_id"]
    engine.run_turns(conversation_id)
    assert Conversation.objects.get(pk=conversation_id).lease_owner is None
    return conversation_id


def test_a_message_while_a_live_writer_holds_the_lease_is_answered_by_it(
    agent: PersonalAgent, dispatched: list[str]
) -> None:
    conversation_id = answered_idle(agent)
    assert lifecycle.take_lease(conversation_id, WRITER)
    assert agent.send(conversation_id, "and now?").status_code == 202
    assert dispatched == []
    assert Conversation.objects.get(pk=conversation_id).status == "working"
    # The writer's turns (as the recovery sweep hands a taken lease to the engine) answer it.
    engine.run_turns(conversation_id, owner=WRITER)
    conversation = Conversation.objects.get(pk=conversation_id)
    assert conversation.status == "idle" and conversation.lease_owner is None
    events = agent.read(conversation_id).json()["events"]
    assert kinds(events)[-4:] == [
        ("message", "user"),
        ("state", "working", "agent"),
        ("message", "company"),
        ("state", "idle", "agent"),
    ]


def test_a_message_after_the_writer_s_lease_expired_is_dispatched(
    agent: PersonalAgent, dispatched: list[str]
) -> None:
    conversation_id = answered_idle(agent)
    assert lifecycle.take_lease(conversation_id, WRITER)
    Conversation.objects.filter(pk=conversation_id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert agent.send(conversation_id, "anyone?").status_code == 202
    assert dispatched == [conversation_id]


def test_a_message_with_no_lease_held_is_dispatched(
    agent: PersonalAgent, dispatched: list[str]
) -> None:
    conversation_id = answered_idle(agent)
    assert agent.send(conversation_id, "and now?").status_code == 202
    assert dispatched == [conversation_id]
