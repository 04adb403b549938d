"""A message written in one statement (PostgreSQL) sends the save signals the ORM's saves
send on SQLite (tests/embedded runs the same assertions there): a receiver an adopter
connects to ``Conversation`` or ``MessageReceipt`` fires on both databases."""

from __future__ import annotations

import pytest

from tests.agents import PersonalAgent
from tests.model_signals import assert_a_messages_saves, saves
from tests.turn_control import dispatch_lost
from tests.wire.wire_support import quiet_start

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_message_sends_the_conversations_and_its_receipts_save_signals(
    agent: PersonalAgent,
) -> None:
    conversation_id = quiet_start(agent)
    with dispatch_lost(), saves() as seen:
        assert agent.send(conversation_id, "hello").status_code == 202
    assert_a_messages_saves(seen)
