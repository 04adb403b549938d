"""One owner, below the UI: the service API's refusals, each leaving nothing written, and the
races a team makes (two joins, two replies, a reply and a turn) won by exactly one, every time,
on real threads with their own database connections."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from poppy_django import fanout, service
from poppy_django.agent.runtime import TurnOutcome
from poppy_django.engine import transitions
from poppy_django.errors import PoppyError
from poppy_django.fanout import publishing
from poppy_django.models import Conversation, DeskEvent, Event
from poppy_django.store import lifecycle
from tests.agents import PersonalAgent, messages
from tests.desk.conftest import make_user
from tests.turn_control import dispatch_lost
from tests.wire.wire_support import quiet_start

pytestmark = pytest.mark.django_db(transaction=True)

#: How many times each race is run: one lucky ordering proves nothing.
RACES = 15


@pytest.fixture
def team(db: Any) -> list[str]:
    """Two staff members on the desk."""
    return [make_user(name="sam").username, make_user(name="pat").username]


def refused(code: str, call: Callable[[], object]) -> PoppyError:
    with pytest.raises(PoppyError) as caught:
        call()
    assert caught.value.code == code, caught.value
    return caught.value


def written(conversation_id: str) -> tuple[int, list[tuple[int, str]], str]:
    """What a refusal must leave unchanged: events, desk events, and who has it."""
    conversation = Conversation.objects.get(pk=conversation_id)
    desk = list(DeskEvent.objects.filter(conversation_id=conversation_id).values_list("pk", "kind"))
    return conversation.last_seq, desk, conversation.assignee


def newest(conversation_id: str) -> str:
    return service.get(conversation_id).last_event_id


def test_joining_what_another_holds_is_refused_naming_them(agent: PersonalAgent, team) -> None:
    conversation_id = quiet_start(agent)
    service.human_joined(conversation_id, by="sam")
    before = written(conversation_id)
    error = refused("held_by_other", lambda: service.human_joined(conversation_id, by="pat"))
    assert error.extra == {"holder": "sam"} and "sam" in (error.description or "")
    assert error.status == 409
    assert written(conversation_id) == before
    service.human_joined(conversation_id, by="sam")  # joining again changes nothing
    assert written(conversation_id) == before


def test_a_take_over_is_recorded_and_told_to_the_desk_only(
    agent: PersonalAgent, team, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[str, str, dict]] = []
    monkeypatch.setattr(publishing, "send_event", lambda *args: sent.append(args))
    monkeypatch.setattr(publishing.bus, "publish", lambda *args, **options: sent.append(args))
    conversation_id = quiet_start(agent)
    service.human_joined(conversation_id, by="sam")
    sent.clear()
    service.take_over(conversation_id, by="pat", request_id="rq-take-over-1")
    assert service.get(conversation_id).assignee == "pat"
    (took,) = DeskEvent.objects.filter(conversation_id=conversation_id)
    assert (took.kind, took.by, took.other, took.request_id) == (
        "took_over",
        "pat",
        "sam",
        "rq-take-over-1",
    )
    assert sent == [
        (
            fanout.desk_channel(),
            fanout.DESK_NEWS,
            {
                "conversation_id": conversation_id,
                "desk_event": took.pk,
                "kind": "took_over",
                "by": "pat",
                "other": "sam",
                "assignee": "pat",
                "request_id": "rq-take-over-1",
            },
        )
    ]
    # The previous holder is now the one refused.
    refused("held_by_other", lambda: service.human_left(conversation_id, by="sam"))


def test_sending_joins_a_conversation_no_one_has_in_the_same_step(
    agent: PersonalAgent, team
) -> None:
    conversation_id = quiet_start(agent)
    reply = service.post_message(
        conversation_id, "Sam here.", by="sam", seen=newest(conversation_id)
    )
    state = service.get(conversation_id)
    assert (state.responder, state.assignee) == ("human", "sam")
    events = agent.read(conversation_id).json()["events"]
    assert [e["type"] for e in events[-2:]] == ["state", "message"]
    assert events[-1]["id"] == reply.public_id and events[-1]["message"]["sender"] == "human"


def test_a_reply_over_what_the_staffer_has_not_seen_is_refused_saying_what_arrived(
    agent: PersonalAgent, team
) -> None:
    conversation_id = quiet_start(agent)
    service.human_joined(conversation_id, by="sam")
    seen = newest(conversation_id)
    with dispatch_lost():
        agent.send(conversation_id, "Actually, it is order A-2.")
    before = written(conversation_id)
    error = refused(
        "conversation_changed",
        lambda: service.post_message(conversation_id, "About A-1…", by="sam", seen=seen),
    )
    assert error.status == 409
    assert error.extra["seen"] == seen
    assert error.extra["last_event_id"] == newest(conversation_id)
    assert [e["message"]["text"] for e in error.extra["arrived"]] == ["Actually, it is order A-2."]
    assert written(conversation_id) == before
    # Having read it, the reply goes through.
    service.post_message(conversation_id, "A-2 it is.", by="sam", seen=newest(conversation_id))


def test_ones_own_join_is_no_news(agent: PersonalAgent, team) -> None:
    """The page may not have shown the join its staffer pressed before the reply is sent."""
    conversation_id = quiet_start(agent)
    seen = newest(conversation_id)
    service.human_joined(conversation_id, by="sam")
    service.post_message(conversation_id, "Sam here.", by="sam", seen=seen)
    # A colleague's message is news, though.
    seen = newest(conversation_id)
    service.take_over(conversation_id, by="pat")
    refused(
        "held_by_other", lambda: service.post_message(conversation_id, "x", by="sam", seen=seen)
    )
    service.post_message(conversation_id, "Pat here.", by="pat", seen=newest(conversation_id))
    service.take_over(conversation_id, by="sam")
    error = refused(
        "conversation_changed",
        lambda: service.post_message(conversation_id, "Still me.", by="sam", seen=seen),
    )
    assert [e["message"]["text"] for e in error.extra["arrived"]] == ["Pat here."]


def test_a_refused_reply_leaves_not_even_the_join(agent: PersonalAgent, team) -> None:
    conversation_id = quiet_start(agent)
    seen = newest(conversation_id)
    with dispatch_lost():
        agent.send(conversation_id, "hello?")
    before = written(conversation_id)
    refused(
        "conversation_changed",
        lambda: service.post_message(conversation_id, "Hi", by="sam", seen=seen),
    )
    assert written(conversation_id) == before
    assert service.get(conversation_id).responder == "agent"


@pytest.mark.parametrize(
    "seen", ["", "evt_nope_1", "not an id", "evt_{key}_99", "evt_{key}_0", 17, None]
)
def test_a_reply_must_name_an_event_of_this_conversation(
    agent: PersonalAgent, team, seen: Any
) -> None:
    conversation_id = quiet_start(agent)
    if isinstance(seen, str):
        seen = seen.format(key=conversation_id.removeprefix("cnv_"))
    before = written(conversation_id)
    refused(
        "invalid_request",
        lambda: service.post_message(conversation_id, "Hi", by="sam", seen=seen),
    )
    assert written(conversation_id) == before


def test_replying_into_what_another_holds_is_refused(agent: PersonalAgent, team) -> None:
    conversation_id = quiet_start(agent)
    service.human_joined(conversation_id, by="sam")
    before = written(conversation_id)
    error = refused(
        "held_by_other",
        lambda: service.post_message(
            conversation_id, "Pat here", by="pat", seen=newest(conversation_id)
        ),
    )
    assert error.extra == {"holder": "sam"}
    for call in (
        lambda: service.human_left(conversation_id, by="pat"),
        lambda: service.request_user(conversation_id, "why", by="pat"),
        lambda: service.close(conversation_id, by="pat"),
    ):
        refused("held_by_other", call)
    assert written(conversation_id) == before


@pytest.mark.parametrize("by", ["", "   "])
def test_a_person_is_named(agent: PersonalAgent, by: str) -> None:
    conversation_id = quiet_start(agent)
    before = written(conversation_id)
    refused("invalid_request", lambda: service.human_joined(conversation_id, by=by))
    refused(
        "invalid_request",
        lambda: service.post_message(conversation_id, "x", by=by, seen=newest(conversation_id)),
    )
    assert written(conversation_id) == before


def test_no_reply_while_the_user_is_in_a_direct_conversation(agent: PersonalAgent, team) -> None:
    parent_id = quiet_start(agent)
    with dispatch_lost():
        direct = agent.start("it is me", parent_conversation_id=parent_id)
    assert direct.status_code == 201, direct.content
    before = written(parent_id)
    error = refused(
        "direct_conversation_open",
        lambda: service.post_message(parent_id, "Hi", by="sam", seen=newest(parent_id)),
    )
    assert error.extra == {"direct_conversation_id": direct.json()["conversation_id"]}
    assert written(parent_id) == before


def test_a_closed_conversation_takes_nothing(agent: PersonalAgent, team) -> None:
    conversation_id = quiet_start(agent)
    service.close(conversation_id, by="sam")
    before = written(conversation_id)
    refused("conversation_closed", lambda: service.human_joined(conversation_id, by="sam"))
    refused(
        "conversation_closed",
        lambda: service.post_message(conversation_id, "x", by="sam", seen=newest(conversation_id)),
    )
    assert written(conversation_id) == before


def test_a_turn_in_flight_when_a_person_joins_writes_nothing(agent: PersonalAgent, team) -> None:
    with dispatch_lost():
        conversation_id = agent.start("where is my order?").json()["conversation_id"]
    assert lifecycle.take_lease(conversation_id, "worker-a")
    slot = transitions.claim(conversation_id, "worker-a")
    assert isinstance(slot, transitions.TurnSlot)
    request = transitions.prepare(slot)
    service.human_joined(conversation_id, by="sam")
    before = written(conversation_id)
    transitions.commit(
        request, TurnOutcome(text="the agent's late reply"), "worker-a", slot.seen_seq
    )
    assert written(conversation_id) == before
    texts = [m.get("text") for m in messages(agent.read(conversation_id).json()["events"])]
    assert "the agent's late reply" not in texts
    # Its messages are the person's now: leaving does not answer them again.
    conversation = Conversation.objects.get(pk=conversation_id)
    assert conversation.answered_seq >= slot.upto_seq


# Races --------------------------------------------------------------------------------------


def race(*calls: Callable[[], object]) -> list[object]:
    """Run the calls at once, each on its own thread and database connection; what each
    returned or raised."""
    start = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            start.wait()
            results[index] = calls[index]()
        except Exception as exc:  # a refusal is a result here
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), "a racer never finished"
    return results


def codes(results: list[object]) -> list[str]:
    return sorted(r.code if isinstance(r, PoppyError) else "ok" for r in results)  # type: ignore[union-attr]


def test_two_joins_at_once_one_wins_every_time(agent: PersonalAgent, team) -> None:
    for _ in range(RACES):
        conversation_id = quiet_start(agent)
        results = race(
            lambda: service.human_joined(conversation_id, by="sam"),
            lambda: service.human_joined(conversation_id, by="pat"),
        )
        assert codes(results) == ["held_by_other", "ok"], results
        winner = "sam" if results[0] is None else "pat"
        loser = results[1] if winner == "sam" else results[0]
        assert loser.extra == {"holder": winner}  # type: ignore[union-attr]
        assert service.get(conversation_id).assignee == winner
        states = Event.objects.filter(conversation_id=conversation_id, type="state")
        assert [e.meta["by"] for e in states] == [winner]


def test_two_replies_at_once_one_is_written_every_time(agent: PersonalAgent, team) -> None:
    for _ in range(RACES):
        conversation_id = quiet_start(agent)
        seen = newest(conversation_id)
        results = race(
            lambda: service.post_message(conversation_id, "from sam", by="sam", seen=seen),
            lambda: service.post_message(conversation_id, "from pat", by="pat", seen=seen),
        )
        assert codes(results) in (["held_by_other", "ok"], ["conversation_changed", "ok"])
        replies = [
            m.get("text", "") for m in messages(agent.read(conversation_id).json()["events"])
        ]
        assert len([t for t in replies if t.startswith("from ")]) == 1, replies


def test_the_same_reply_sent_twice_at_once_is_written_once(agent: PersonalAgent, team) -> None:
    for _ in range(RACES):
        conversation_id = quiet_start(agent)
        service.human_joined(conversation_id, by="sam")
        seen = newest(conversation_id)
        results = race(
            lambda: service.post_message(conversation_id, "once", by="sam", seen=seen),
            lambda: service.post_message(conversation_id, "once", by="sam", seen=seen),
        )
        assert codes(results) == ["conversation_changed", "ok"], results
        replies = [
            m.get("text", "") for m in messages(agent.read(conversation_id).json()["events"])
        ]
        assert replies.count("once") == 1


def test_a_reply_racing_a_turn_one_answer_every_time(agent: PersonalAgent, team) -> None:
    for attempt in range(RACES):
        with dispatch_lost():
            conversation_id = agent.start(f"question {attempt}").json()["conversation_id"]
        owner = f"worker-{attempt}"
        assert lifecycle.take_lease(conversation_id, owner)
        slot = transitions.claim(conversation_id, owner)
        assert isinstance(slot, transitions.TurnSlot)
        request = transitions.prepare(slot)
        seen = newest(conversation_id)
        results = race(
            lambda: transitions.commit(
                request, TurnOutcome(text="agent answer"), owner, slot.seen_seq
            ),
            lambda: service.post_message(conversation_id, "person answer", by="sam", seen=seen),
        )
        person = results[1]
        answers = [
            m["text"]
            for m in messages(agent.read(conversation_id).json()["events"])
            if m["role"] == "company"
        ]
        assert len(answers) == 1, (answers, results)
        if isinstance(person, PoppyError):
            assert person.code == "conversation_changed" and answers == ["agent answer"]
        else:
            assert answers == ["person answer"]
            assert service.get(conversation_id).assignee == "sam"
