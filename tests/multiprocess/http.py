"""A personal agent over real HTTP (httpx), with the fake verifier's header."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx

from poppy_django.client import iter_sse
from poppy_django.verifier.fake import fake_authorization

_ids = itertools.count(1)


class HttpAgent:
    def __init__(self, *, account_id: str | None = None, scopes: tuple[str, ...] = ()) -> None:
        self.user_id = f"mp-user-{time.monotonic_ns()}"
        self.headers = {
            "Authorization": fake_authorization(
                "https://pa.example/mp", self.user_id, account_id=account_id, scopes=scopes
            )
        }

    def post(self, base: str, path: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(
            f"{base}/poppy/conversations{path}", json=body, headers=self.headers, timeout=40
        )

    def message(self, text: str) -> dict[str, Any]:
        return {
            "message": {
                "id": f"mp-{next(_ids)}-{time.monotonic_ns()}",
                "sender": "agent",
                "text": text,
            }
        }

    def read(
        self, base: str, conversation_id: str, *, cursor: str | None = None, wait: float = 0
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"wait": wait}
        if cursor:
            params["cursor"] = cursor
        response = httpx.get(
            f"{base}/poppy/conversations/{conversation_id}/events",
            params=params,
            headers=self.headers,
            timeout=wait + 30,
        )
        response.raise_for_status()
        return response.json()

    def all_events(self, base: str, conversation_id: str) -> list[dict[str, Any]]:
        return self.read(base, conversation_id)["events"]

    def wait_for(
        self, base: str, conversation_id: str, predicate: Any, timeout: float = 30
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            events = self.all_events(base, conversation_id)
            if predicate(events):
                return events
            time.sleep(0.2)
        raise AssertionError(f"timed out: {events}")

    def stream(
        self,
        base: str,
        conversation_id: str,
        opened: threading.Event | None = None,
        **headers: str,
    ) -> Iterator[tuple[str | None, str | None, dict[str, Any]]]:
        """(event name or None for a stored event, id, data) for each SSE frame.

        Sets ``opened`` at the stream's opening comment, which the server writes once it is
        listening for the conversation's wake-ups.
        """
        with httpx.stream(
            "GET",
            f"{base}/poppy/conversations/{conversation_id}/events",
            headers={**self.headers, "Accept": "text/event-stream", **headers},
            timeout=httpx.Timeout(60, read=60),
        ) as response:
            assert response.status_code == 200, response.read()

            def lines() -> Iterator[str]:
                for line in response.iter_lines():
                    if opened is not None and line.startswith(":"):
                        opened.set()
                    yield line

            for frame in iter_sse(lines()):
                name = None if frame.event == "message" else frame.event
                yield name, frame.id, frame.json()


def company_messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["message"] for e in events if e["type"] == "message" and e["message"]["role"] == "company"
    ]
