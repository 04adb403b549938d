"""Shared fixtures: a personal agent talking to the endpoint through Django's test client.

Tests that need turns use ``transaction=True``: turns are dispatched only when the
message's transaction commits, and run on the in-process turn engine (its loop and database
threads), which must see committed rows. Each test waits for its turns to finish before the
database is flushed.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from poppy_django.engine import loop as engine
from poppy_django.engine.executors import ThreadExecutor
from poppy_django.verifier.fake import fake_authorization

ENDPOINT = "/poppy/conversations"
_ids = itertools.count(1)


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


class PersonalAgent:
    """One personal agent acting for one User, speaking the wire through the test client."""

    def __init__(
        self,
        client_id: str = "https://pa.example/client",
        user_id: str | None = None,
        *,
        account_id: str | None = None,
        scopes: tuple[str, ...] = (),
    ) -> None:
        self.client = Client()
        self.client_id = client_id
        self.user_id = user_id or unique("user")
        self.account_id = account_id
        self.scopes = scopes

    def signed_in(self, account_id: str, scopes: tuple[str, ...] = ()) -> PersonalAgent:
        """The same User, signed in to an account (a new token)."""
        other = PersonalAgent(self.client_id, self.user_id, account_id=account_id, scopes=scopes)
        return other

    def headers(self) -> dict[str, str]:
        return {
            "HTTP_AUTHORIZATION": fake_authorization(
                self.client_id, self.user_id, account_id=self.account_id, scopes=self.scopes
            )
        }

    def post(self, path: str, body: Any = None, *, raw: bytes | None = None, **extra: Any):
        data = raw if raw is not None else json.dumps(body if body is not None else {})
        return self.client.post(
            ENDPOINT + path, data=data, content_type="application/json", **self.headers(), **extra
        )

    def get(self, path: str, **extra: Any):
        return self.client.get(ENDPOINT + path, **self.headers(), **extra)

    def start(self, text: str | None = "hello", *, query: str = "", **message: Any):
        message.setdefault("id", unique("m"))
        message.setdefault("sender", "agent")
        if text is not None:
            message.setdefault("text", text)
        parent = message.pop("parent_conversation_id", None)
        body: dict[str, Any] = {"message": message}
        if parent:
            body["parent_conversation_id"] = parent
        return self.post(query, body)

    def send(
        self, conversation_id: str, text: str | None = "hello", *, query: str = "", **message: Any
    ):
        message.setdefault("id", unique("m"))
        message.setdefault("sender", "agent")
        if text is not None:
            message.setdefault("text", text)
        return self.post(f"/{conversation_id}/messages{query}", {"message": message})

    def read(self, conversation_id: str, query: str = "", **extra: Any):
        return self.get(f"/{conversation_id}/events{query}", **extra)

    def events_until(self, conversation_id: str, predicate, *, timeout: float = 20.0) -> list[dict]:
        """All events so far, long-polling until ``predicate(events)`` holds."""
        import time

        deadline = time.monotonic() + timeout
        events: list[dict] = []
        cursor = None
        while True:
            query = "?wait=2" + (f"&cursor={cursor}" if cursor else "")
            page = self.read(conversation_id, query).json()
            events += page["events"]
            cursor = page["cursor"]
            if predicate(events):
                return events
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; events so far: {events}")

    def settled(self, conversation_id: str, *, timeout: float = 20.0) -> list[dict]:
        """Every event once no turn is running (the last state event is not ``working``)."""

        def idle(events: list[dict]) -> bool:
            states = [e for e in events if e["type"] == "state"]
            return bool(states) and states[-1]["status"] != "working"

        return self.events_until(conversation_id, idle, timeout=timeout)


@pytest.fixture
def agent() -> PersonalAgent:
    """A signed-out personal agent for a fresh User."""
    return PersonalAgent()


@pytest.fixture
def acct1() -> PersonalAgent:
    """A personal agent signed in to acct-1 with poppy:read and poppy:write."""
    return PersonalAgent(account_id="acct-1", scopes=("poppy:read", "poppy:write"))


@pytest.fixture(autouse=True)
def _acme_orders(request: pytest.FixtureRequest) -> None:
    """Transactional tests flush the database, seed orders included: put them back."""
    if request.node.get_closest_marker("django_db") is None:
        return
    request.getfixturevalue("db")  # the database the test's django_db marker asks for
    from example_project.shop.models import Order
    from example_project.shop.seed import seed_orders

    seed_orders(Order)


@pytest.fixture(autouse=True)
def _finish_turns() -> Iterator[None]:
    """Turns still running would write into the next test's (flushed) database."""
    yield
    ThreadExecutor.shutdown(wait=True)


@contextmanager
def dispatch_lost() -> Iterator[None]:
    """Messages recorded meanwhile are never dispatched, as if their process died at commit."""
    original = ThreadExecutor.dispatch
    ThreadExecutor.dispatch = classmethod(lambda cls, conversation_id: None)  # type: ignore[assignment]
    try:
        yield
    finally:
        ThreadExecutor.dispatch = original  # type: ignore[method-assign]


@contextmanager
def engine_queries() -> Iterator[list[str]]:
    """The SQL of the turns run meanwhile, in order: the engine runs them on one database
    thread, whose connection is captured (the heartbeat, every ``HEARTBEAT_SECONDS``, is not
    a turn's)."""
    with override_settings(POPPY={**settings.POPPY, "EXECUTOR_THREADS": 1}):
        database = engine.current().database
        capture = CaptureQueriesContext(connection)
        database.submit(capture.__enter__).result()
        sql: list[str] = []
        try:
            yield sql
        finally:
            database.submit(capture.__exit__, None, None, None).result()
            sql.extend(
                database.submit(
                    lambda: [query["sql"] for query in capture.captured_queries]
                ).result()
            )


def messages(events: list[dict]) -> list[dict]:
    return [e["message"] for e in events if e["type"] == "message"]


def kinds(events: list[dict]) -> list[tuple]:
    """A compact view: (type, role or status)."""
    out = []
    for e in events:
        if e["type"] == "message":
            out.append(("message", e["message"]["role"]))
        elif e["type"] == "state":
            out.append(("state", e["status"], e["responder"]))
        else:
            out.append((e["type"],))
    return out


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """Close connections after each use: pool threads must not keep the test DB open."""
    from django.conf import settings

    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0
