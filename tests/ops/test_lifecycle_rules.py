"""Each rule of who may speak is written once and asked two ways: of a row
(``rule(conversation)``: the service's refusals, the engine's checks) and of the table
(``rule.q``: the desk's queue, ``service.mine()``). The two must agree on every state."""

from __future__ import annotations

import itertools

import pytest

from poppy_django import service
from poppy_django.models import Conversation, Responder, Status
from poppy_django.store import lifecycle

RULES = {
    name: getattr(lifecycle, name)
    for name in (
        "WORKING",
        "IDLE",
        "QUEUED",
        "CLOSED",
        "OPEN",
        "PERSON_HOLDS",
        "AGENT_RESPONDS",
        "WITH_PEOPLE",
        "HANDED_TO_PEOPLE",
        "AGENT_ANSWERS",
        "AGENT_MAY_WRITE",
    )
}


@pytest.fixture
def every_state(db) -> dict[str, Conversation]:
    """A conversation in each state there is, assigned to sam."""
    return {
        conversation.id: conversation
        for conversation in (
            Conversation.objects.create(
                client_id="c",
                user_id="u",
                agent_name="support",
                status=status,
                responder=responder,
                assignee="sam",
            )
            for status, responder in itertools.product(Status.values, Responder.values)
        )
    }


@pytest.mark.parametrize("name", sorted(RULES))
def test_a_rule_asked_of_a_row_and_of_the_table_agrees(
    every_state: dict[str, Conversation], name: str
) -> None:
    rule = RULES[name]
    by_row = {pk for pk, conversation in every_state.items() if rule(conversation)}
    by_table = set(Conversation.objects.filter(rule.q).values_list("pk", flat=True))
    assert by_row == by_table
    assert 0 < len(by_row) < len(every_state)  # each rule tells states apart


def test_whom_a_conversation_is_with_follows_the_rule(
    every_state: dict[str, Conversation],
) -> None:
    held = {pk for pk, c in every_state.items() if lifecycle.holder(c) == "sam"}
    assert held == set(service.mine("sam").values_list("pk", flat=True))
    assert {(c.status, c.responder) for c in every_state.values() if c.pk in held} == {
        (Status.QUEUED, Responder.AGENT),
        (Status.QUEUED, Responder.HUMAN),
        (Status.WORKING, Responder.HUMAN),
        (Status.IDLE, Responder.HUMAN),
    }
