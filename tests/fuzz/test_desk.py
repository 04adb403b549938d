"""The desk shows any stored message: property-based, through the desk's HTTP views.

A personal agent's ``data`` and ``context`` may hold any JSON, and rows written by older
versions or other code may hold any shape at all; the conversation page and its events
JSON must answer 200 for each, and ``events.json?after=`` anything but a sequence number
is a JSON 400 (``desk_after`` too); the queue, its search and the alerts read any stored
message too.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from django.db import transaction
from django.test import Client
from hypothesis import given, settings
from hypothesis import strategies as st

from poppy_django import ids
from poppy_django.models import Conversation
from poppy_django.store import event_log
from tests.desk.conftest import desk_url
from tests.fuzz.harness import PROFILE
from tests.fuzz.strategies import json_values, objects, texts

pytestmark = pytest.mark.django_db

#: PostgreSQL's jsonb holds neither U+0000 nor NaN: rows never contain them.
STORABLE = False


def stored_messages() -> st.SearchStrategy[Any]:
    anything = json_values(STORABLE)
    message = st.fixed_dictionaries(
        {},
        optional={
            "id": anything,
            "role": st.sampled_from(["user", "company"]) | anything,
            "sender": st.sampled_from(["agent", "human"]) | anything,
            "text": texts(STORABLE, 100) | anything,
            "data": st.fixed_dictionaries(
                {},
                optional={
                    "components": st.lists(objects(STORABLE) | anything, max_size=3) | anything,
                    "actions": st.lists(objects(STORABLE) | anything, max_size=3) | anything,
                },
            )
            | anything,
            "context": objects(STORABLE) | anything,
        },
    )
    # A Python None is SQL NULL, which the column refuses: every other JSON value is stored.
    return st.fixed_dictionaries({"message": message | anything}) | anything.filter(
        lambda value: value is not None
    )


def test_fuzz_the_desk_shows_any_stored_message(desk: Client) -> None:
    @settings(settings.get_profile(PROFILE))
    @given(payload=stored_messages(), role=st.sampled_from(["user", "company", ""]))
    def case(payload: Any, role: str) -> None:
        conversation = Conversation.objects.create(
            client_id="https://pa.example/c", user_id="u", agent_name="support"
        )
        with transaction.atomic():
            event = event_log.append(event_log.lock(conversation.id), "message", payload, role=role)
        page = desk.get(desk_url(conversation.id), {"event": event.public_id})
        assert page.status_code == 200
        answer = desk.get(desk_url(conversation.id, "events.json"), {"after": event.seq - 1})
        assert answer.status_code == 200
        assert [e["seq"] for e in answer.json()["events"]] == [event.seq]
        # The queue (what the customer last said, a search of what was said) and every
        # page's alerts read the same rows.
        for query in ({"partial": "rows"}, {"partial": "rows", "q": "pole tent"}):
            assert desk.get("/admin/poppy_django/conversation/desk/", query).status_code == 200
        Conversation.objects.filter(pk=conversation.id).update(status="queued")
        alerts = desk.get("/admin/poppy_django/conversation/desk/alerts.json")
        assert alerts.status_code == 200 and alerts.json()["waiting"] >= 1

    case()


@pytest.mark.parametrize("name", ["after", "desk_after"])
def test_fuzz_events_json_after(desk: Client, name: str) -> None:
    conversation = Conversation.objects.create(
        client_id="https://pa.example/c", user_id="u", agent_name="support"
    )

    @settings(settings.get_profile(PROFILE))
    @given(after=st.text(max_size=30) | st.text("0123456789", min_size=19, max_size=5000))
    def case(after: str) -> None:
        answer = desk.get(desk_url(conversation.id, "events.json"), {name: after})
        sequence = after.isascii() and after.isdigit() and len(after) <= 18
        assert answer.status_code == (200 if sequence else 400), after
        assert (
            "events" in answer.json() if sequence else answer.json()["error"] == "invalid_request"
        )

    case()


def test_fuzz_the_transcript_pages_before(desk: Client) -> None:
    """``?before=`` is a sequence number (ASCII digits, at most 18) or a ``400`` page: "²",
    "٣" and a 5,000-digit number included (issue 51, R9)."""
    conversation = Conversation.objects.create(
        client_id="https://pa.example/c", user_id="u", agent_name="support"
    )

    @settings(settings.get_profile(PROFILE))
    @given(before=st.text(max_size=30) | st.text("0123456789", min_size=19, max_size=5000))
    def case(before: str) -> None:
        page = desk.get(desk_url(conversation.id), {"before": before})
        sequence = before.isascii() and before.isdigit() and len(before) <= 18
        assert page.status_code == (200 if sequence else 400), before

    case()


def test_fuzz_any_conversation_id_in_a_desk_url_is_a_404(desk: Client) -> None:
    """A path part that no conversation id can be (U+0000 and any character outside the
    id alphabet, or too long) matches no desk route: 404 on every desk URL, never a query
    (PostgreSQL refuses U+0000 with an error: a 500 before issue 51, R9)."""
    tails = ["", "events.json", "canned.json", "stream/", "change/", "approvals/1/approve/"]

    @settings(settings.get_profile(PROFILE))
    @given(
        conversation_id=texts(hostile=True, max_size=30).filter(
            lambda value: not ids.is_valid_id(value) and "/" not in value
        )
        | st.just("cnv_" + "a" * 300),
        tail=st.sampled_from(tails),
    )
    def case(conversation_id: str, tail: str) -> None:
        quoted = quote(conversation_id.encode("utf-8", "surrogatepass"), safe="")
        assert desk.get(desk_url(quoted, tail)).status_code == 404, conversation_id
        action = desk.post(desk_url(quoted, "action/reply/"), data={})
        assert action.status_code == 404, conversation_id

    case()
