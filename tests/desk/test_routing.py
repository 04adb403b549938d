"""Who is given a handoff, through the service API and the personal agent's endpoint: only
staff with a live desk (leaving is known at once, not 90 s later), the least loaded with
room (capacity), supervisors only when they opt in, and handoffs of someone who goes away or
leaves given to someone who is there."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone

from poppy_django import service, signals
from poppy_django.engine import recovery
from poppy_django.models import (
    Conversation,
    DeskConnection,
    DeskEvent,
    DeskEventKind,
    StaffPresence,
)
from poppy_django.service import rerouting
from poppy_django.staff import connections, presence
from tests.agents import PersonalAgent
from tests.desk.conftest import DESK, make_user, on_shift
from tests.wire.wire_support import poppy, quiet_start

pytestmark = pytest.mark.django_db(transaction=True)


def hand_off() -> str:
    """A new customer asks for a person: the conversation, as queued."""
    customer = PersonalAgent()
    conversation_id = quiet_start(customer)
    response = customer.post(f"/{conversation_id}/handoff", {})
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "queued", response.content
    return conversation_id


def assignee(conversation_id: str) -> str:
    return Conversation.objects.get(pk=conversation_id).assignee


def test_leaving_the_desk_counts_at_once_not_after_the_presence_window() -> None:
    on_shift("alice")
    on_shift("bob")
    page = connections.opened("alice")
    assert presence.available() == ["alice", "bob"]
    # Alice closes her only desk tab: seconds ago she was seen, yet she has left.
    assert connections.closed(page) is True
    assert presence.available() == ["bob"]
    assert [assignee(hand_off()) for _ in range(2)] == ["bob", "bob"]
    # A desk page of hers opening again makes her available again.
    service.staff_seen("alice")
    assert presence.available() == ["alice", "bob"]


def test_one_tab_closing_of_two_leaves_the_desk_live() -> None:
    on_shift("alice")
    first, second = connections.opened("alice"), connections.opened("alice")
    assert connections.closed(first) is False
    assert presence.available() == ["alice"]
    # A connection a crashed process never closed stops counting once it is not renewed.
    crashed = connections.opened("alice")
    DeskConnection.objects.filter(pk=crashed).update(
        renewed_at=timezone.now() - timedelta(seconds=91)
    )
    assert connections.closed(second) is True
    assert presence.available() == []
    assert not DeskConnection.objects.exists()


def test_the_least_loaded_with_room_gets_the_handoff() -> None:
    for name in ("alice", "bob"):
        on_shift(name)
    with poppy(DESK_CAPACITY=2):
        given = [assignee(hand_off()) for _ in range(4)]
        # Equal loads take turns; each holds two now: both full, so the next waits for anyone.
        assert sorted(given) == ["alice", "alice", "bob", "bob"]
        assert assignee(hand_off()) == ""
        # Bob finishes one; he has the room now.
        mine = service.mine("bob").first()
        assert mine is not None
        service.human_joined(mine.pk, by="bob")
        service.human_left(mine.pk, by="bob")
        assert assignee(hand_off()) == "bob"
        # Alice's own capacity (set in the admin) overrides the setting.
        StaffPresence.objects.filter(user__username="alice").update(capacity=3)
        assert assignee(hand_off()) == "alice"
        assert assignee(hand_off()) == ""


def test_a_lighter_load_wins_over_the_round_robin() -> None:
    on_shift("alice")
    for _ in range(3):
        assert assignee(hand_off()) == "alice"
    on_shift("bob")  # arrives later, holding nothing: the next three are his
    assert [assignee(hand_off()) for _ in range(3)] == ["bob", "bob", "bob"]
    assert assignee(hand_off()) == "alice"  # three each: the one whose last is oldest


def test_supervisors_are_out_of_the_rotation_unless_they_opt_in() -> None:
    lena = make_user(name="lena")
    lena.is_superuser = True
    lena.save()
    lead = make_user(name="lee")
    lead.user_permissions.add(Permission.objects.get(codename="view_desk_reports"))
    on_shift("lena")
    on_shift("lee")
    # Watching the desk, they are there (a handoff is queued), but given nothing.
    assert assignee(hand_off()) == ""
    StaffPresence.objects.filter(user=lena).update(in_rotation=True)
    assert assignee(hand_off()) == "lena"


def alerted(user: User) -> tuple[int, dict[str, bool]]:
    """What ``user``'s desk pages read (alerts.json): the count, and which alert them."""
    client = Client()
    client.force_login(user)
    response = client.get(f"{DESK}alerts.json")
    assert response.status_code == 200, response.content
    answer = response.json()
    return answer["waiting"], {item["id"]: item["alert"] for item in answer["conversations"]}


def test_supervisors_out_of_the_rotation_see_the_count_not_the_alert() -> None:
    lena = make_user(name="lena")
    lena.is_superuser = True
    lena.save()
    lead = make_user(name="lee")
    lead.user_permissions.add(Permission.objects.get(codename="view_desk_reports"))
    on_shift("lena")
    on_shift("lee")
    waiting = hand_off()  # for no one in particular: no one there is in the rotation
    assert assignee(waiting) == ""
    bob = on_shift("bob")  # a staff member arrives: a handoff for anyone is his to take
    assert alerted(bob) == (1, {waiting: True})
    assert alerted(lena) == (1, {waiting: False})
    assert alerted(lead) == (1, {waiting: False})
    # Lena opts in: she takes handoffs for anyone, and is alerted of them.
    StaffPresence.objects.filter(user=lena).update(in_rotation=True)
    assert alerted(lena) == (1, {waiting: True})
    assert alerted(lead) == (1, {waiting: False})
    # Away, Bob takes none: the count only.
    service.set_away("bob", True)
    assert alerted(bob) == (1, {waiting: False})


def test_going_away_gives_the_waiting_handoffs_to_someone_there() -> None:
    on_shift("alice")
    waiting = [hand_off(), hand_off()]
    assert {assignee(c) for c in waiting} == {"alice"}
    on_shift("bob")
    moved: list[dict[str, Any]] = []

    def receive(**kwargs: Any) -> None:
        moved.append(kwargs)

    signals.conversation_assigned.connect(receive)
    try:
        service.set_away("alice", True)
    finally:
        signals.conversation_assigned.disconnect(receive)
    assert [assignee(c) for c in waiting] == ["bob", "bob"]
    assert {(m["previous"], m["assignee"], m["how"]) for m in moved} == {
        ("alice", "bob", "reassigned")
    }
    logged = DeskEvent.objects.filter(kind=DeskEventKind.REASSIGNED, conversation_id=waiting[0])
    assert [(e.by, e.other, e.text) for e in logged] == [("alice", "bob", "alice went away")]
    # With no one else there, going away leaves them waiting for whoever joins first.
    service.set_away("alice", False)
    third = hand_off()
    assert assignee(third) == "alice"  # bob holds two
    service.set_away("bob", True)
    service.set_away("alice", True)
    assert assignee(third) == "" and [assignee(c) for c in waiting] == ["", ""]


def test_the_sweep_gives_away_the_handoffs_of_someone_who_left() -> None:
    on_shift("alice")
    page = connections.opened("alice")
    conversation_id = hand_off()
    assert assignee(conversation_id) == "alice"
    on_shift("bob")
    connections.closed(page)
    recovery.sweep()  # within the grace a page moving to the next one needs: still hers
    assert assignee(conversation_id) == "alice"
    # The grace over (her last page seen before she left, as it was).
    gone = timezone.now() - timedelta(seconds=rerouting.LEFT_GRACE_SECONDS + 1)
    StaffPresence.objects.filter(user__username="alice").update(
        last_seen_at=gone - timedelta(seconds=1), left_at=gone
    )
    recovery.sweep()  # what every worker runs every SWEEP_SECONDS
    assert assignee(conversation_id) == "bob"
    event = DeskEvent.objects.get(kind=DeskEventKind.REASSIGNED, conversation_id=conversation_id)
    assert event.text == "alice left the desk"


def test_a_handoff_assigned_to_someone_never_at_the_desk_goes_to_someone_there() -> None:
    on_shift("bob")
    make_user(name="carol")  # on the team, no desk page open
    conversation_id = hand_off()
    service.assign(conversation_id, "carol", by="bob")
    recovery.sweep()
    assert assignee(conversation_id) == "bob"


def test_a_handoff_waiting_for_room_goes_to_the_first_who_has_it() -> None:
    for name in ("alice", "bob"):
        on_shift(name)
    with poppy(DESK_CAPACITY=1):
        given = [hand_off(), hand_off()]
        waiting, given_back = hand_off(), hand_off()
        assert [assignee(c) for c in (waiting, given_back)] == ["", ""]
        service.assign(given_back, "alice", by="bob")
        service.unassign(given_back, by="alice")  # for whoever joins first, on purpose
        recovery.sweep()  # no one has room: nothing moves
        assert [assignee(c) for c in (waiting, given_back)] == ["", ""]
        holder = assignee(given[0])
        service.human_joined(given[0], by=holder)
        service.human_left(given[0], by=holder)  # room again
        recovery.sweep()
        assert assignee(waiting) == holder and assignee(given_back) == ""
        event = DeskEvent.objects.get(conversation_id=waiting, kind=DeskEventKind.REASSIGNED)
        assert (event.by, event.other, event.text) == ("", holder, rerouting.ROOM)
