"""Desk fixtures: staff with and without the desk permission, and conversations to handle."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from poppy_django import service
from poppy_django.fanout import publishing
from tests.agents import PersonalAgent
from tests.desk.browser import launched

DESK = "/admin/poppy_django/conversation/desk/"
_names = itertools.count(1)


def desk_url(conversation_id: str, tail: str = "") -> str:
    return f"{DESK}{conversation_id}/{tail}"


def make_user(*, staff: bool = True, desk: bool = True, name: str | None = None) -> User:
    user = User.objects.create_user(name or f"staff{next(_names)}", password=None, is_staff=staff)
    if desk:
        user.user_permissions.add(Permission.objects.get(codename="handle_conversations"))
    return user


@pytest.fixture
def desk_user(db: Any) -> User:
    return make_user(name="sam")


@pytest.fixture
def desk(desk_user: User) -> Client:
    """A browser signed in as a staff member holding the desk permission."""
    client = Client()
    client.force_login(desk_user)
    return client


def new_request_id() -> str:
    return str(uuid.uuid4())


def act(client: Client, conversation_id: str, name: str, request_id: str | None = None, **body):
    """POST one desk action as the page does (JSON, a browser-made request id; a reply over
    the newest event unless ``seen`` is given)."""
    body["request_id"] = request_id or new_request_id()
    if name == "reply" and "seen" not in body:
        body["seen"] = service.get(conversation_id).last_seq
    return client.post(
        desk_url(conversation_id, f"action/{name}/"),
        data=json.dumps(body),
        content_type="application/json",
    )


def on_shift(name: str = "sam") -> User:
    """A staff member with a desk page open (available): the example hook then queues."""
    user = User.objects.filter(username=name).first() or make_user(name=name)
    service.staff_seen(name)
    return user


def queued(agent: PersonalAgent, text: str = "hello", *, staff: str = "sam") -> str:
    """A conversation whose personal agent asked for a person while ``staff`` is on shift
    (the example hook queues it; the round robin assigns it to them)."""
    on_shift(staff)
    conversation_id = agent.start(text).json()["conversation_id"]
    agent.settled(conversation_id)
    response = agent.post(f"/{conversation_id}/handoff", {})
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "queued"
    return conversation_id


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, dict]]:
    """What fan-out publishes (channel, type, data) to readers and browsers, still delivered."""
    sent: list[tuple[str, str, dict]] = []

    def recording(real: Callable[..., None]) -> Callable[..., None]:
        # The bus's publish of a nudge takes the conversation's version too (a keyword):
        # dropped, the publish failed, no version was set, and the process's tail went on
        # answering reads without the write (a personal agent missing the desk's reply).
        def record(channel: str, event_type: str, data: dict, **options: Any) -> None:
            sent.append((channel, event_type, data))
            real(channel, event_type, data, **options)

        return record

    monkeypatch.setattr(publishing, "send_event", recording(publishing.send_event))
    monkeypatch.setattr(publishing.bus, "publish", recording(publishing.bus.publish))
    return sent


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium for a browser module's tests, launched once for the module."""
    with launched() as running:
        yield running
