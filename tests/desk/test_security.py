"""Every desk view and the live channels: the desk permission, the admin login, CSRF."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import AnonymousUser
from django.core import checks
from django.test import AsyncClient, Client, override_settings

from poppy_django.desk.channels import DeskChannelManager
from poppy_django.desk.checks import check_channel_manager
from poppy_django.models import Conversation
from tests.desk.conftest import DESK, desk_url, make_user, new_request_id

pytestmark = pytest.mark.django_db

ACTIONS = [
    "join",
    "take_over",
    "reply",
    "leave",
    "unavailable",
    "request_user",
    "close",
    "assign",
    "unassign",
    "transfer",
    "note",
]


@pytest.fixture
def conversation() -> Conversation:
    return Conversation.objects.create(
        client_id="https://pa.example/c", user_id="u", agent_name="support"
    )


def every_get(conversation_id: str) -> list[str]:
    return [
        DESK,
        f"{DESK}?partial=rows",
        f"{DESK}stream/",
        f"{DESK}alerts.json",
        desk_url(conversation_id),
        desk_url(conversation_id, "events.json"),
        desk_url(conversation_id, "canned.json"),
        desk_url(conversation_id, "stream/"),
    ]


def every_post(conversation_id: str) -> list[str]:
    return [desk_url(conversation_id, f"action/{name}/") for name in ACTIONS] + [
        f"{DESK}presence/",
        desk_url(conversation_id, "approvals/1/approve/"),
        desk_url(conversation_id, "approvals/1/reject/"),
    ]


def post_json(client: Client, url: str):
    body = json.dumps({"request_id": new_request_id(), "text": "x", "reason": "x"})
    return client.post(url, data=body, content_type="application/json")


def test_anonymous_users_are_sent_to_the_admin_login(conversation: Conversation) -> None:
    client = Client()
    for url in every_get(conversation.id) + every_post(conversation.id):
        response = client.post(url) if "action" in url or "approvals" in url else client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/admin/login/"), url
    conversation.refresh_from_db()
    assert conversation.last_seq == 0


def test_signed_in_non_staff_get_nothing(conversation: Conversation) -> None:
    client = Client()
    client.force_login(make_user(staff=False, desk=True))
    for url in every_get(conversation.id):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], url
    for url in every_post(conversation.id):
        assert post_json(client, url).status_code == 302, url
    conversation.refresh_from_db()
    assert conversation.last_seq == 0


def test_staff_without_the_permission_get_403(conversation: Conversation) -> None:
    client = Client()
    client.force_login(make_user(staff=True, desk=False))
    for url in every_get(conversation.id):
        assert client.get(url).status_code == 403, url
    for url in every_post(conversation.id):
        assert post_json(client, url).status_code == 403, url
    conversation.refresh_from_db()
    assert conversation.last_seq == 0 and conversation.assignee == ""


def test_staff_with_the_permission_see_the_desk(desk: Client, conversation: Conversation) -> None:
    assert desk.get(DESK).status_code == 200
    page = desk.get(desk_url(conversation.id))
    assert page.status_code == 200
    assert b"poppy_django/desk/desk.js" in page.content
    # The Conversation admin links to the desk.
    changelist = desk.get("/admin/poppy_django/conversation/")
    assert changelist.status_code in (200, 403)  # view permission is a separate matter


def test_the_changelist_links_to_the_desk(conversation: Conversation) -> None:
    client = Client()
    client.force_login(make_user(name="root-ish", staff=True, desk=True))
    admin = make_user(staff=True, desk=True)
    admin.is_superuser = True
    admin.save()
    client.force_login(admin)
    changelist = client.get("/admin/poppy_django/conversation/")
    assert changelist.status_code == 200
    assert DESK.encode() in changelist.content


def test_every_action_needs_a_csrf_token(desk_user, conversation: Conversation) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(desk_user)
    for url in every_post(conversation.id):
        assert post_json(client, url).status_code == 403, url
    conversation.refresh_from_db()
    assert conversation.last_seq == 0
    # With the page's token (the cookie the page sets, sent back as X-CSRFToken): accepted.
    page = client.get(desk_url(conversation.id))
    token = page.cookies["csrftoken"].value
    assert b'name="csrfmiddlewaretoken"' in page.content
    response = client.post(
        desk_url(conversation.id, "action/join/"),
        data=json.dumps({"request_id": new_request_id()}),
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )
    assert response.status_code == 200, response.content
    conversation.refresh_from_db()
    assert conversation.responder == "human"


def test_actions_refuse_get(desk: Client, conversation: Conversation) -> None:
    assert desk.get(desk_url(conversation.id, "action/join/")).status_code == 405


# The live channels ------------------------------------------------------------------------


def test_the_channel_manager_keeps_poppy_channels_to_desk_staff() -> None:
    manager = DeskChannelManager()
    for channel in ("poppy-desk", "poppy-cnv_abc"):
        assert manager.can_read_channel(None, channel) is False
        assert manager.can_read_channel(AnonymousUser(), channel) is False
        assert manager.can_read_channel(make_user(staff=False, desk=False), channel) is False
        assert manager.can_read_channel(make_user(staff=True, desk=False), channel) is False
        assert manager.can_read_channel(make_user(staff=True, desk=True), channel) is True
        assert manager.is_channel_reliable(channel) is False
    # Other channels keep django-eventstream's default.
    assert manager.can_read_channel(None, "news") is True


def first_chunk(client: AsyncClient, url: str) -> tuple[int, str, str]:
    async def read() -> tuple[int, str, str]:
        response = await client.get(url)
        if not response.streaming:
            return response.status_code, response.get("Content-Type", ""), response.content.decode()
        iterator = aiter(response.streaming_content)
        chunk = await anext(iterator)
        await iterator.aclose()
        return response.status_code, response["Content-Type"], chunk.decode()

    return async_to_sync(read)()


def test_the_desk_stream_opens_for_desk_staff(desk_user, conversation: Conversation) -> None:
    client = AsyncClient()
    async_to_sync(client.aforce_login)(desk_user)
    for url in (f"{DESK}stream/", desk_url(conversation.id, "stream/")):
        status, content_type, body = first_chunk(client, url)
        assert status == 200
        assert content_type.startswith("text/event-stream")
        assert "event: stream-open" in body


@pytest.mark.urls("tests.desk.urls")
def test_a_generic_eventstream_url_refuses_poppy_channels_to_others() -> None:
    """Even through a django_eventstream URL a project mounts, poppy-desk is the desk's only."""
    outsider = AsyncClient()
    async_to_sync(outsider.aforce_login)(make_user(staff=True, desk=False))
    status, _, body = first_chunk(outsider, "/events/?channel=poppy-desk")
    assert "stream-error" in body and "forbidden" in body
    assert "stream-open" not in body
    anonymous = AsyncClient()
    _, _, body = first_chunk(anonymous, "/events/?channel=poppy-desk")
    assert "forbidden" in body
    staff = AsyncClient()
    async_to_sync(staff.aforce_login)(make_user(staff=True, desk=True))
    _, _, body = first_chunk(staff, "/events/?channel=poppy-desk")
    assert "event: stream-open" in body and "forbidden" not in body


def test_the_system_check_warns_without_the_desk_channel_manager() -> None:
    assert check_channel_manager() == []
    with override_settings(EVENTSTREAM_CHANNELMANAGER_CLASS=None):
        warnings = check_channel_manager()
    assert [w.id for w in warnings] == ["poppy_django.W201"]
    assert isinstance(warnings[0], checks.Warning)


def test_the_channel_manager_check_is_registered_by_the_app() -> None:
    """W201 runs with ``manage.py check`` (registered in ready(), not by importing the admin)."""
    from django.core.checks import run_checks

    with override_settings(EVENTSTREAM_CHANNELMANAGER_CLASS=None):
        found = [m.id for m in run_checks(tags=[checks.Tags.security])]
    assert "poppy_django.W201" in found
    assert "poppy_django.W201" not in [m.id for m in run_checks(tags=[checks.Tags.security])]


# Odd messages and odd parameters never break the desk -------------------------------------

#: ``data`` a personal agent may send (the wire only requires an object): the desk must show
#: each conversation, whatever its components or actions hold.
ODD_DATA = [
    {"components": "abc"},
    {"actions": [1]},
    {"components": [1, "x", None]},
    {"actions": "abc"},
    {"components": {"name": "card"}},
    {"actions": [{"tool": {"x": 1}, "status": [1], "summary": None, "error": {"e": 2}}]},
    {"components": [{"name": ["n"], "fallback_text": {"t": 1}}], "actions": None},
    {"components": [], "actions": [], "other": [1, {"deep": {"er": [True, None]}}]},
]


@pytest.mark.parametrize("data", ODD_DATA, ids=[json.dumps(d)[:40] for d in ODD_DATA])
def test_a_message_with_odd_data_never_breaks_the_desk(desk: Client, data) -> None:
    from tests.agents import PersonalAgent

    agent = PersonalAgent()
    response = agent.start("look", data=data, context={"locale": "en", "shape": {"a": [1]}})
    assert response.status_code == 201, response.content
    conversation_id = response.json()["conversation_id"]
    page = desk.get(desk_url(conversation_id))
    assert page.status_code == 200
    assert b"look" in page.content
    events = desk.get(desk_url(conversation_id, "events.json"))
    assert events.status_code == 200
    assert "look" in events.json()["events"][0]["html"]


#: Stored shapes the wire refuses but a row may still hold (an older version, a migration).
STORED = [
    {"message": {"role": "user", "sender": "agent", "text": 5, "data": "abc", "context": "x"}},
    {"message": {"role": "user", "sender": "agent", "data": [1], "context": [1, 2]}},
    {"message": "abc"},
    {"message": None},
    {},
]


@pytest.mark.parametrize("payload", STORED, ids=[json.dumps(p)[:40] for p in STORED])
def test_a_stored_message_of_any_shape_is_shown(desk: Client, conversation, payload) -> None:
    from django.db import transaction

    from poppy_django.store import event_log

    with transaction.atomic():
        event_log.append(event_log.lock(conversation.id), "message", payload, role="user")
    assert desk.get(desk_url(conversation.id)).status_code == 200
    answer = desk.get(desk_url(conversation.id, "events.json"))
    assert answer.status_code == 200
    assert [e["seq"] for e in answer.json()["events"]] == [1]


@pytest.mark.parametrize("after", ["٣", "²", "1" * 5000, "9" * 19, "-1", "1.0", " 1", "", "0x1"])
def test_events_json_refuses_what_is_not_a_sequence_number(desk, conversation, after) -> None:
    response = desk.get(desk_url(conversation.id, "events.json"), {"after": after})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"


def test_events_json_takes_any_sequence_number(desk: Client, conversation) -> None:
    for after in ("0", "000", "999999999999999999"):
        response = desk.get(desk_url(conversation.id, "events.json"), {"after": after})
        assert response.status_code == 200, after
        assert response.json()["events"] == []
