"""The core knows the Operations extension only through its seam
(:mod:`poppy_django.agent.proposals`): an action record's outcome is the core's own unless
the registered part adds to it, and the issuer's take-down withdraws a client's proposals
through the seam, not by importing the extension."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from poppy_django.agent import proposals
from poppy_django.agent.proposals import StaffNote
from poppy_django.agent.tools import Tool, ToolContext
from poppy_django.authority.models import Client
from poppy_django.authority.take_down import take_down
from poppy_django.models import ActionRecord, ActionStatus, Conversation


class Recorded:
    """A part that proposes nothing and notes what the core asks it."""

    def __init__(self) -> None:
        self.withdrawn: list[tuple[str, str]] = []

    def proposes(self, tool: Tool, ctx: ToolContext) -> bool:
        return False

    def propose(self, tool: Tool, record: ActionRecord, ctx: ToolContext) -> ActionRecord:
        raise AssertionError("never asked: it proposes nothing")

    def wire_members(self, record: ActionRecord) -> dict[str, Any]:
        return {"proposal": {"of": record.tool}}

    def message_members(self, outcomes: list[dict[str, Any]]) -> dict[str, Any]:
        return {}

    def withdraw_for_client(self, client_id: str, reason: str) -> int:
        self.withdrawn.append((client_id, reason))
        return 2

    def staff_notes(self, records: list[ActionRecord]) -> dict[int, StaffNote]:
        return {}


@pytest.fixture
def part() -> Iterator[Recorded]:
    registered = proposals.proposers.get("operations")
    recorded = Recorded()
    proposals.proposers.register("operations", recorded)
    yield recorded
    if registered is not None:
        proposals.proposers.register("operations", registered)


@pytest.fixture
def record(db) -> ActionRecord:
    conversation = Conversation.objects.create(client_id="c", user_id="u", agent_name="support")
    return ActionRecord.objects.create(
        conversation=conversation,
        call_key="k",
        tool="cancel_order",
        arguments={"order": "A-1"},
        summary="Cancel order A-1",
        status=ActionStatus.PROPOSED,
        actor_id="u",
    )


def test_a_proposed_records_outcome_is_the_cores_and_the_parts(
    record: ActionRecord, part: Recorded, django_assert_num_queries
) -> None:
    with django_assert_num_queries(0):
        outcome = proposals.outcome_of(record)
    assert outcome == {
        "tool": "cancel_order",
        "status": "operation_proposed",
        "summary": "Cancel order A-1",
        "proposal": {"of": "cancel_order"},
    }


def test_without_a_part_the_core_answers_alone_and_queries_nothing(
    record: ActionRecord, django_assert_num_queries
) -> None:
    registered = proposals.proposers.unregister("operations")
    try:
        with django_assert_num_queries(0):
            outcome = proposals.outcome_of(record)
            assert proposals.message_members([outcome]) == {}
            assert proposals.staff_notes([record]) == {}
            assert proposals.withdraw_for_client("c", "gone") == 0
    finally:
        if registered is not None:
            proposals.proposers.register("operations", registered)
    assert set(outcome) == {"tool", "status", "summary"}


def test_a_take_down_withdraws_the_clients_proposals_through_the_seam(db, part: Recorded) -> None:
    Client.objects.create(client_id="https://agent.example/client.json")
    done = take_down(["https://agent.example/client.json", "https://unknown.example/c"], "gone")
    assert part.withdrawn == [("https://agent.example/client.json", "gone")]
    assert done.operations == 2
