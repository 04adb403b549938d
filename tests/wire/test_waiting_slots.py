"""A waiting read's slot is given back even when its request is cancelled mid-cycle.

Found while looking at why ``test_limits.py::test_waiting_reads_are_bounded_per_process``
could hang: a slot taken by a long-poll whose request was cancelled (the client gone) while
DRF's cycle ran in its thread was never released, so every later waiting read of the
process counted it — with ``MAX_WAITING_PER_PROCESS = 1``, forever.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import RequestFactory

from poppy_django.api.throttling import waiting_slots
from poppy_django.api.views import EventsView
from tests.agents import PersonalAgent
from tests.waiting import eventually
from tests.wire.wire_support import no_waiting_slot_held, quiet_start

pytestmark = pytest.mark.django_db(transaction=True)

entered = threading.Event()
proceed = threading.Event()


class HeldEventsView(EventsView):
    """The app's read, held in its thread after it took its slot, until the test says go."""

    def get(self, request: Any, conversation_id: str) -> Any:
        response = super().get(request, conversation_id)
        entered.set()
        proceed.wait(20)
        return response


@dataclass
class HeldLongPoll:
    """A long-poll of a quiet conversation (waiting 20 s after its last event), to be served
    by :class:`HeldEventsView`."""

    conversation_id: str
    request: Any

    async def cancel_mid_cycle(self) -> None:
        """Start it on this loop; once its thread has taken its slot and is held there,
        cancel its request (the client gone): the request ends cancelled, the thread still
        held until the test says go."""
        view = HeldEventsView.as_view()
        task = asyncio.ensure_future(view(self.request, conversation_id=self.conversation_id))
        assert await asyncio.to_thread(entered.wait, 20)
        assert waiting_slots.total == 1  # the long-poll holds its slot
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


@pytest.fixture
def held_long_poll(agent: PersonalAgent) -> Iterator[HeldLongPoll]:
    """A long-poll to hold, no waiting slot held before it; its thread let go at the end
    whatever the test did."""
    conversation_id = quiet_start(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    request = RequestFactory().get(
        f"/poppy/conversations/{conversation_id}/events?wait=20&cursor={cursor}",
        **agent.headers(),
    )
    entered.clear()
    proceed.clear()
    no_waiting_slot_held()
    yield HeldLongPoll(conversation_id, request)
    proceed.set()


def test_a_long_poll_cancelled_while_its_cycle_runs_gives_its_slot_back(
    held_long_poll: HeldLongPoll,
) -> None:
    async def cancel_mid_cycle() -> None:
        await held_long_poll.cancel_mid_cycle()
        proceed.set()  # the thread returns its WaitingResponse after the cancellation
        await asyncio.to_thread(eventually, lambda: waiting_slots.total == 0, what="the slot back")

    asyncio.run(cancel_mid_cycle())


def test_a_long_poll_whose_loop_ends_before_its_cycle_returns_gives_its_slot_back(
    held_long_poll: HeldLongPoll,
) -> None:
    """The client gone, and the loop that served the request ended (as a test client's
    ends with its request: ``asyncio.run`` cancels what is left, here DRF's shielded cycle)
    before the thread returns its WaitingResponse: no callback on that loop can release the
    slot any more. It leaked in 3 of 250 long-polls hung up after 0.1 s on a loaded machine
    (tests/stream/test_sse.py's), and test_limits.py's one slot per process found it held."""

    async def cancel_mid_cycle() -> None:
        await held_long_poll.cancel_mid_cycle()
        # What is left of the request on the loop (DRF's cycle, shielded from the
        # cancellation) is cancelled as the loop ends: only then does the thread return.
        for left in asyncio.all_tasks() - {asyncio.current_task()}:
            left.add_done_callback(lambda _: proceed.set())

    asyncio.run(cancel_mid_cycle())  # it ends once the thread has returned
    assert proceed.is_set()
    eventually(lambda: waiting_slots.total == 0, what="the slot back")
