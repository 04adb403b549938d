"""Property-based fuzzing of the running endpoint: no 5xx, JSON errors, refusals write nothing.

Each route gets its own campaign of requests built from ``strategies.py`` (bodies, headers,
query parameters, cursors, DPoP proofs and Session Tokens, valid and forged) and sent over
HTTP to the example project's ASGI application under uvicorn, verified by the default DPoP
verifier with the development authority as issuer. The bounded run (``make test``) sends
``POPPY_FUZZ_EXAMPLES`` (default 30) cases per route; the long run is
``POPPY_FUZZ_PROFILE=long`` (3,000 per route; see docs/fuzzing.md).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.agents import PersonalAgent
from tests.fuzz.harness import (
    ENDPOINT_PATH,
    PROFILE,
    check,
    credential_headers,
    rows,
    send,
)
from tests.fuzz.strategies import (
    Credentials,
    bad_ids,
    bodies,
    credentials,
    cursors,
    extra_headers,
    mostly,
    valid_ids,
    waits,
)

pytestmark = pytest.mark.timeout(900)


class Target:
    """What one campaign talks to: a caller with one conversation, and another caller's."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.caller = PersonalAgent.with_session_token(base_url)
        self.client = httpx.Client(timeout=30)
        self.conversation_id = self._start(self.caller)
        self.foreign_id = self._start(PersonalAgent.with_session_token(base_url))
        self.cursors = self._cursors()
        self.statuses: Counter[int] = Counter()

    def _start(self, caller: PersonalAgent) -> str:
        url = self.base_url + ENDPOINT_PATH
        body = b'{"message": {"id": "first", "sender": "agent", "text": "hello"}}'
        headers = [(b"content-type", b"application/json")]
        headers += credential_headers(caller, "POST", url, credentials_valid())
        response = self.client.post(url, headers=headers, content=body)
        assert response.status_code == 201, response.text
        return str(response.json()["conversation_id"])

    def _cursors(self) -> list[str]:
        url = f"{self.base_url}{ENDPOINT_PATH}/{self.conversation_id}/events"
        response = self.client.get(
            url, headers=credential_headers(self.caller, "GET", url, credentials_valid())
        )
        return [event["id"] for event in response.json()["events"]]

    def conversation_ids(self) -> st.SearchStrategy[str]:
        others = st.one_of(
            st.just(self.foreign_id),
            valid_ids,
            bad_ids.map(lambda value: quote(value, safe="")),
        )
        return mostly(st.just(self.conversation_id), others, tenths=7)

    def run(self, method: str, path: str, query: dict[str, str], how, headers, body, writes):
        url = self.base_url + path
        if query:
            url += "?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in query.items())
        sent = list(headers) + credential_headers(self.caller, method, url, how)
        before = rows()
        answer = send(self.client, method, url, sent, body)
        self.statuses[answer.status] += 1
        check(answer, before, writes, how)

    def report(self, route: str) -> None:
        """The answers' statuses (the long run's results), and proof the campaign got past
        the verifier: a campaign refused at the door would test nothing behind it."""
        statuses = dict(sorted(self.statuses.items()))
        print(f"\n{route}: {sum(statuses.values())} cases, statuses {statuses}")
        assert any(status not in (400, 401, 403) for status in self.statuses), self.statuses


def credentials_valid() -> Credentials:
    return Credentials("valid")


def queries(target: Target, *, cursor: bool) -> st.SearchStrategy[dict[str, str]]:
    optional: dict[str, Any] = {"wait": waits(), "other": st.text(max_size=10)}
    if cursor:
        optional["cursor"] = cursors(target.cursors)
    return mostly(st.just({}), st.fixed_dictionaries({}, optional=optional), tenths=5)


def campaign(test: Any) -> Any:
    return settings(settings.get_profile(PROFILE))(test)


def test_fuzz_start_conversation(live: str) -> None:
    target = Target(live)

    @campaign
    @given(
        query=queries(target, cursor=True),
        how=credentials(),
        headers=extra_headers(),
        body=bodies() | bodies().map(lambda b: _with_parent(b, target)),
    )
    def case(query, how, headers, body) -> None:
        target.run("POST", ENDPOINT_PATH, query, how, headers, body, writes=True)

    case()
    target.report("POST {endpoint}")


def test_fuzz_post_message(live: str) -> None:
    target = Target(live)

    @campaign
    @given(
        conversation_id=target.conversation_ids(),
        query=queries(target, cursor=True),
        how=credentials(),
        headers=extra_headers(),
        body=bodies(),
    )
    def case(conversation_id, query, how, headers, body) -> None:
        path = f"{ENDPOINT_PATH}/{conversation_id}/messages"
        target.run("POST", path, query, how, headers, body, writes=True)

    case()
    target.report("POST {endpoint}/{id}/messages")


def test_fuzz_read_events(live: str) -> None:
    target = Target(live)

    @campaign
    @given(
        conversation_id=target.conversation_ids(),
        query=queries(target, cursor=True),
        how=credentials(),
        headers=extra_headers(),
    )
    def case(conversation_id, query, how, headers) -> None:
        path = f"{ENDPOINT_PATH}/{conversation_id}/events"
        target.run("GET", path, query, how, headers, None, writes=False)

    case()
    target.report("GET {endpoint}/{id}/events")


@pytest.mark.parametrize("action", ["handoff", "close"])
def test_fuzz_handoff_and_close(live: str, action: str) -> None:
    target = Target(live)

    @campaign
    @given(
        conversation_id=target.conversation_ids(),
        how=credentials(),
        headers=extra_headers(),
        body=bodies() | st.just(b"{}"),
    )
    def case(conversation_id, how, headers, body) -> None:
        path = f"{ENDPOINT_PATH}/{conversation_id}/{action}"
        target.run("POST", path, {}, how, headers, body, writes=True)

    case()
    target.report(f"POST {{endpoint}}/{{id}}/{action}")


def test_fuzz_other_paths_and_methods(live: str) -> None:
    target = Target(live)
    tails = st.sampled_from(["", "/{id}/messages", "/{id}/events", "/{id}/handoff", "/{id}/close"])
    junk = st.text(max_size=30).map(lambda s: "/" + quote(s, safe="/"))

    @campaign
    @given(
        method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]),
        tail=tails | junk,
        conversation_id=target.conversation_ids(),
        how=credentials(),
        headers=extra_headers(),
        body=st.none() | bodies(),
    )
    def case(method, tail, conversation_id, how, headers, body) -> None:
        path = ENDPOINT_PATH + tail.replace("{id}", conversation_id)
        right = (method == "GET") == tail.endswith("/events") and method in ("GET", "POST")
        target.run(method, path, {}, how, headers, body, writes=right)

    case()
    target.report("other paths and methods")


def _with_parent(body: bytes, target: Target) -> bytes:
    """A first message naming the caller's conversation as its parent."""
    try:
        value = json.loads(body)
    except ValueError:
        return body
    if isinstance(value, dict):
        value["parent_conversation_id"] = target.conversation_id
    return json.dumps(value, allow_nan=True).encode()
