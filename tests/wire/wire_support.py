"""Helpers shared by the wire conformance modules (not a test module itself)."""

from __future__ import annotations

import gc
import re
from typing import Any

from django.conf import settings
from django.test import override_settings

from poppy_django.models import ActionRecord, AgentThread, Conversation, Event, MessageReceipt
from tests.staff import company_message

#: The wire's id alphabet (ids, event ids and cursors).
ID_RE = re.compile(r"[A-Za-z0-9_-]{1,256}")
STATUSES = {"working", "idle", "queued", "closed"}
RESPONDERS = {"agent", "human"}
READ_KEYS = {"conversation_id", "events", "cursor", "has_more", "status", "responder"}
ANSWER_KEYS = {"conversation_id", "status", "responder"}


def poppy(**changes: Any) -> override_settings:
    """``override_settings`` of the example project's POPPY dict with some keys changed."""
    return override_settings(POPPY={**settings.POPPY, **changes})


def rows() -> dict[str, int]:
    """How many durable rows exist: a refused request must leave these unchanged."""
    return {
        "conversations": Conversation.objects.count(),
        "events": Event.objects.count(),
        "receipts": MessageReceipt.objects.count(),
        "threads": AgentThread.objects.count(),
        "actions": ActionRecord.objects.count(),
    }


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """A JSON error body with ``error`` = code, under ``status``, never cached."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert body["error"] == code, body
    assert "error_description" not in body or isinstance(body["error_description"], str)
    assert "no-store" in response.get("Cache-Control", ""), response.get("Cache-Control")
    return body


def quiet_start(agent: Any, **context: Any) -> str:
    """A conversation started by a context-only message: recorded, no turn, status idle."""
    response = agent.start(None, context=context or {"locale": "en-GB"})
    assert response.status_code == 201, response.content
    return str(response.json()["conversation_id"])


def add_company_messages(conversation_id: str, count: int) -> None:
    """Events without turns: staff messages through the company service."""
    for n in range(count):
        company_message(conversation_id, f"note {n}")


def no_waiting_slot_held() -> None:
    """Wait until this process holds no waiting-read slot: every earlier test's long-polls
    and streams have given theirs back (cancelled and hung-up ones too). Streams opened
    through the test client and never read give theirs back once collected (an ASGI server
    always reads or closes them)."""
    from poppy_django.api.throttling import waiting_slots
    from tests.waiting import eventually

    def none_held() -> bool:
        gc.collect()
        return waiting_slots.total == 0

    eventually(none_held, what="every earlier waiting read's slot given back")
