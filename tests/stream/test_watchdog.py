"""A lost wake-up (a failed publish) is caught by the process's watchdog, for every reader."""

from __future__ import annotations

import threading
import time

import pytest

from poppy_django import fanout
from poppy_django.fanout.listening import waiting_readers
from tests.agents import PersonalAgent
from tests.staff import company_message
from tests.stream.asgi import get
from tests.waiting import eventually

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def nudges_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fanout, "nudge_on_commit", lambda *args, **kwargs: None)


@pytest.fixture
def quick_watchdog(settings) -> None:
    settings.POPPY = {**settings.POPPY, "WAKE_FALLBACK_SECONDS": 0.3}


def _waiting(conversation_id: str):
    """Whether a reader of the conversation has read once (it sets seen_seq) and now waits."""
    return lambda: any(
        r.conversation_id == conversation_id and r.seen_seq > 0 for r in waiting_readers()
    )


def _post_when(ready, conversation_id: str) -> threading.Thread:
    """A message from the company side, written once ``ready()`` holds; no nudge is sent."""

    def post() -> None:
        eventually(ready, what="the reader to wait")
        company_message(conversation_id, "unannounced")

    thread = threading.Thread(target=post)
    thread.start()
    return thread


def test_a_long_poll_whose_nudge_was_lost_is_woken(
    agent: PersonalAgent, quick_watchdog, nudges_lost
):
    conversation_id = agent.start("hello").json()["conversation_id"]
    cursor = agent.settled(conversation_id)[-1]["id"]

    poster = _post_when(_waiting(conversation_id), conversation_id)
    began = time.monotonic()
    page = agent.read(conversation_id, f"?cursor={cursor}&wait=25").json()
    poster.join()
    assert [e["message"]["text"] for e in page["events"]] == ["unannounced"]
    assert time.monotonic() - began < 15  # the watchdog, not the end of the wait


def test_a_stream_whose_nudge_was_lost_is_woken(agent: PersonalAgent, quick_watchdog, nudges_lost):
    conversation_id = agent.start("hello").json()["conversation_id"]
    cursor = agent.settled(conversation_id)[-1]["id"]
    poster = _post_when(_waiting(conversation_id), conversation_id)
    headers = {
        "authorization": agent.headers()["HTTP_AUTHORIZATION"],
        "accept": "text/event-stream",
    }
    response = get(
        f"/poppy/conversations/{conversation_id}/events?cursor={cursor}",
        headers,
        hang_up=lambda body: b"unannounced" in body,
        timeout=20,
    )
    poster.join()
    assert [e["message"]["text"] for e in response.stored] == ["unannounced"]
