"""The seam of a part that proposes a consequential call instead of acting (the Operations
extension): all the core knows of it.

The core asks the registered :class:`Proposals` whether a call is proposed, has it record the
proposal, and lets it add what it knows to the wire: to a proposed action's outcome
(:func:`outcome_of`) and to the message that carries such outcomes (:func:`message_members`).
An operator taking a personal agent down withdraws its open proposals through it
(:func:`withdraw_for_client`). The core never queries the part's tables nor names its
vocabulary: without a registered part, an action record is the core's alone.

>>> proposals.proposers.register("operations", OperationProposals())  # from ready()
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from poppy_django.agent.tools import Tool, ToolContext
from poppy_django.models import ActionRecord, ActionStatus
from poppy_django.registries import Registry


@dataclass(frozen=True)
class StaffNote:
    """What staff read of an action's proposal beside the action on the desk."""

    #: What the proposal is, in one word (the page marks it ``data-<kind>="<id>"``).
    kind: str
    id: str
    text: str


class Proposals(Protocol):
    """What a part that proposes instead of acting answers the core."""

    def proposes(self, tool: Tool, ctx: ToolContext) -> bool:
        """Whether this call of a consequential ``tool`` is proposed rather than run."""
        ...

    def propose(self, tool: Tool, record: ActionRecord, ctx: ToolContext) -> ActionRecord:
        """Propose the call of this pending ``record``: the record, ``proposed`` now."""
        ...

    def wire_members(self, record: ActionRecord) -> dict[str, Any]:
        """Members a proposed record's outcome carries on the wire besides the core's."""
        ...

    def message_members(self, outcomes: list[dict[str, Any]]) -> dict[str, Any]:
        """Members a company message carrying these outcomes gets, in its ``data`` and as
        members of its own."""
        ...

    def withdraw_for_client(self, client_id: str, reason: str) -> int:
        """Withdraw the client's open proposals (``reason``: what its User reads); how many."""
        ...

    def staff_notes(self, records: list[ActionRecord]) -> dict[int, StaffNote]:
        """What staff read of the proposals of these records (whatever their status now),
        by record id."""
        ...


#: The parts that propose instead of acting, by name (the Operations extension).
proposers: Registry[Proposals] = Registry("proposers")


def proposer_for(tool: Tool, ctx: ToolContext) -> Proposals | None:
    """The part that proposes this call of a consequential ``tool``, or None: it runs."""
    return next((part for part in proposers if part.proposes(tool, ctx)), None)


def outcome_of(record: ActionRecord) -> dict[str, Any]:
    """An action record's outcome as the wire carries it (with the proposal's members when
    the record was proposed)."""
    outcome = record.to_wire()
    if record.status == ActionStatus.PROPOSED:
        for part in proposers:
            outcome.update(part.wire_members(record))
    return outcome


def message_members(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """The members a message carrying ``outcomes`` gets from the parts ({} without one)."""
    members: dict[str, Any] = {}
    for part in proposers:
        members.update(part.message_members(outcomes))
    return members


def staff_notes(records: list[ActionRecord]) -> dict[int, StaffNote]:
    """The staff notes of these records' proposals, by record id ({} without a part)."""
    notes: dict[int, StaffNote] = {}
    for part in proposers if records else ():
        notes.update(part.staff_notes(records))
    return notes


def withdraw_for_client(client_id: str, reason: str) -> int:
    """Withdraw the client's open proposals; how many (0 without a part)."""
    return sum(part.withdraw_for_client(client_id, reason) for part in proposers)
