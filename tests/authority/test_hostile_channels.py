"""Hostile input on the channels is a JSON 4xx, never a 500 (issue 43, the lows), against the
example project as shipped (:mod:`tests.authority.shipped`: production mode, no setting
overridden). The module's fixture fails if any service logged a 5xx or a traceback.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from personal_agent_protocol.errors import AuthorizationError, SessionError

from tests.authority.shipped import ORIGIN, ShippedAcme, shipped_acme
from tests.authority.shipped_agent import ATLAS, MCP_URL, Agent

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]
DEEP = b"[" * 5000 + b"]" * 5000
#: Shipped: POPPY["FEEDBACK_REPORTS_PER_HOUR"] and operations' MAX_OPEN_PROPOSALS.
REPORTS_PER_HOUR = 10
OPEN_PROPOSALS = 20
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@pytest.fixture(scope="module")
def acme(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShippedAcme]:
    with shipped_acme(Path(tmp_path_factory.mktemp("acme")), [ATLAS]) as running:
        yield running
        problems = running.log_problems()
    assert not problems, "\n".join(problems[:40])


def strict_json(answer: httpx.Response) -> Any:
    """The answer's body as JSON proper (no NaN or Infinity)."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(answer.content, parse_constant=refuse)


def rpc(method: str, params: Any = None, rpc_id: Any = 1) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


async def signed_in(acme: ShippedAcme, user: str) -> tuple[Agent, Any, Any]:
    """An agent, its Session signed in to acct-1 (poppy:read, poppy:write, orders:read) and
    that Session's MCP token."""
    atlas = Agent(acme)
    await atlas.discover()
    polled = await atlas.signed_in(user, "acct-1", ("poppy:read", "poppy:write", "orders:read"))
    return atlas, polled, await atlas.mcp_token(user, polled)


def test_json_nested_5000_deep_is_a_json_refusal_everywhere(acme: ShippedAcme) -> None:
    user = "usr_hostile_deep_0000001"

    async def scenario() -> dict[str, httpx.Response]:
        atlas, polled, mcp = await signed_in(acme, user)
        return {
            "mcp": await atlas.mcp(user, mcp, DEEP),
            "feedback": await atlas.dpop(
                user, polled.token, "POST", f"{ORIGIN}/poppy/feedback", DEEP
            ),
            "sign-in": await atlas.dpop(
                user, polled.token, "POST", f"{ORIGIN}/poppy/sign-in", DEEP
            ),
        }

    answers = asyncio.run(scenario())
    assert strict_json(answers["mcp"])["error"]["code"] == -32700
    for route in ("feedback", "sign-in"):
        assert answers[route].status_code == 400, (route, answers[route].text[:200])
        assert strict_json(answers[route])["error"] == "invalid_request"


def test_nul_and_lone_surrogates_never_reach_a_tool_a_query_or_a_proposal(
    acme: ShippedAcme,
) -> None:
    user = "usr_hostile_nul_00000001"

    async def scenario() -> dict[str, httpx.Response]:
        atlas, polled, mcp = await signed_in(acme, user)
        surrogate = b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":'
        surrogate += b'"cancel_order","arguments":{"order_id":"A-2\\ud800"}}}'
        return {
            "tool_nul": await atlas.mcp(
                user, mcp, rpc("tools/call", {"name": "list_orders", "arguments": {"x": "\x00"}})
            ),
            "proposal_nul": await atlas.mcp(
                user,
                mcp,
                rpc("tools/call", {"name": "cancel_order", "arguments": {"order_id": "A-2\x00"}}),
            ),
            "proposal_surrogate": await atlas.mcp(user, mcp, surrogate),
            "path_nul": await atlas.dpop(
                user, polled.token, "POST", f"{ORIGIN}/api/orders/A-2%00/cancel", b"{}"
            ),
            "read_nul": await atlas.dpop(user, polled.token, "GET", f"{ORIGIN}/api/orders/A-2%00"),
            "sign_in_id_nul": await atlas.dpop(
                user, polled.token, "POST", f"{ORIGIN}/poppy/sign-in/msi_%00", b'{"code": "1"}'
            ),
        }

    answers = asyncio.run(scenario())
    for name in ("tool_nul", "proposal_nul", "proposal_surrogate"):
        assert strict_json(answers[name])["error"]["code"] == -32602, name
    for name in ("path_nul", "read_nul"):
        assert answers[name].status_code == 400, (name, answers[name].text[:200])
        assert strict_json(answers[name])["error"] == "invalid_request"
    assert answers["sign_in_id_nul"].status_code == 404
    assert strict_json(answers["sign_in_id_nul"])["error"] == "sign_in_not_found"


def test_mcp_ids_that_are_not_json_and_its_transport_header_rules(acme: ShippedAcme) -> None:
    user = "usr_hostile_mcp_ids_0001"

    async def scenario() -> dict[str, httpx.Response]:
        atlas, _, mcp = await signed_in(acme, user)
        ping = b'{"jsonrpc":"2.0","id":%s,"method":"ping"}'
        async with acme.client() as http:
            return {
                "nan": await atlas.mcp(user, mcp, ping % b"NaN"),
                "infinity": await atlas.mcp(user, mcp, ping % b"-Infinity"),
                "version": await atlas.mcp(
                    user, mcp, rpc("ping"), **{"MCP-Protocol-Version": "1999-01-01"}
                ),
                "known_version": await atlas.mcp(
                    user, mcp, rpc("ping"), **{"MCP-Protocol-Version": "2025-06-18"}
                ),
                "origin": await atlas.mcp(user, mcp, rpc("ping"), Origin="https://evil.example"),
                "own_origin": await atlas.mcp(user, mcp, rpc("ping"), Origin=ORIGIN),
                "origin_unauthenticated": await http.post(
                    MCP_URL, content=rpc("ping"), headers={"Origin": "https://evil.example"}
                ),
            }

    answers = asyncio.run(scenario())
    for name in ("nan", "infinity"):
        body = strict_json(answers[name])
        assert body["id"] is None and body["error"]["code"] == -32600, name
    assert answers["version"].status_code == 400
    assert strict_json(answers["version"])["error"] == "invalid_request"
    assert answers["known_version"].status_code == 200
    assert answers["origin"].status_code == 403
    assert answers["origin_unauthenticated"].status_code == 403
    assert answers["own_origin"].status_code == 200


def test_proposals_are_bounded_in_size_and_number(acme: ShippedAcme) -> None:
    user = "usr_hostile_proposals_01"

    async def scenario() -> tuple[httpx.Response, list[int]]:
        atlas, _, mcp = await signed_in(acme, user)

        def cancel(order_id: str) -> bytes:
            return rpc("tools/call", {"name": "cancel_order", "arguments": {"order_id": order_id}})

        huge = await atlas.mcp(user, mcp, cancel("A" * 100_000))
        statuses = []
        for n in range(OPEN_PROPOSALS + 1):
            statuses.append((await atlas.mcp(user, mcp, cancel(f"Z-{n}"))).status_code)
        return huge, statuses

    huge, statuses = asyncio.run(scenario())
    assert huge.status_code == 400 and strict_json(huge)["error"] == "invalid_request"
    assert statuses == [200] * OPEN_PROPOSALS + [429]


def test_feedback_is_limited_per_user_across_sessions(acme: ShippedAcme) -> None:
    user = "usr_hostile_feedback_001"
    report = json.dumps(
        {"kind": "missing", "task": "track a parcel", "description": "no tracking"}
    ).encode()

    async def scenario() -> list[int]:
        atlas = Agent(acme)
        await atlas.discover()
        statuses = []
        for _ in range(REPORTS_PER_HOUR + 1):  # a new Session for every report
            session = await atlas.session(user)
            sent = await atlas.dpop(user, session, "POST", f"{ORIGIN}/poppy/feedback", report)
            statuses.append(sent.status_code)
        return statuses

    assert asyncio.run(scenario()) == [202] * REPORTS_PER_HOUR + [429]


def test_a_revision_in_other_digits_is_a_clear_400_on_the_operation_page(
    acme: ShippedAcme,
) -> None:
    user = "usr_hostile_revision_001"

    async def scenario() -> list[httpx.Response]:
        atlas, polled, mcp = await signed_in(acme, user)
        proposed = await atlas.mcp(
            user,
            mcp,
            rpc("tools/call", {"name": "cancel_order", "arguments": {"order_id": "A-2"}}),
        )
        url = strict_json(proposed)["result"]["structuredContent"]["operation"]["url"]
        browser = await atlas.join(user, polled.token.session_id)
        page = await browser.get(url)
        token = _CSRF.search(page.text)
        assert token, page.text
        answers = []
        for revision in ("²", "١", "1e3"):
            answers.append(
                await browser.post(
                    url,
                    content=urlencode(
                        {"csrfmiddlewaretoken": token.group(1), "revision": revision}
                    ).encode(),
                    headers={
                        "Content-Type": "application/x-www-form-urlencoded",
                        "Origin": ORIGIN,
                        "Referer": url,
                    },
                )
            )
        return answers

    for answer in asyncio.run(scenario()):
        assert answer.status_code == 400, answer.text[:300]


def test_taking_the_client_down_ends_everything_it_holds(acme: ShippedAcme) -> None:
    """Last in this module: Atlas is taken down for good."""
    user = "usr_hostile_take_down_01"
    reason = "Acme stopped serving this agent after abuse; ask your User to contact us."

    async def scenario() -> dict[str, Any]:
        atlas, polled, mcp = await signed_in(acme, user)
        proposed = await atlas.mcp(
            user,
            mcp,
            rpc("tools/call", {"name": "cancel_order", "arguments": {"order_id": "A-1"}}),
        )
        operation = strict_json(proposed)["result"]["structuredContent"]["operation"]
        said = await asyncio.to_thread(
            acme.manage, "poppy_take_down_client", ATLAS.client_id, "--reason", reason
        )
        seen: dict[str, Any] = {"said": said, "operation_id": operation["operation_id"]}
        seen["mcp"] = await atlas.mcp(user, mcp, rpc("ping"))
        seen["api"] = await atlas.dpop(user, polled.token, "GET", f"{ORIGIN}/api/orders")
        for name, attempt in (
            ("account_token", lambda: atlas.mcp_token(user, polled)),
            ("new_session", lambda: atlas.session(user)),
        ):
            try:
                seen[name] = "works" if await attempt() is not None else "signed_out"
            except (AuthorizationError, SessionError) as refused:
                seen[name] = refused.code
        return seen

    seen = asyncio.run(scenario())
    assert "Taken down: 1 client(s)" in seen["said"]
    assert seen["mcp"].status_code == 401 and seen["api"].status_code == 401
    assert seen["account_token"] == seen["new_session"] == "invalid_client"
    state = acme.manage(
        "shell",
        "-c",
        "from poppy_django.operations.models import Operation; "
        f"o = Operation.objects.get(pk={seen['operation_id']!r}); print(o.state, o.result_summary)",
    )
    assert f"cancelled {reason}" in state
