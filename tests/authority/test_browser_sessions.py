"""Browser sessions: the SDK's browser client joins Acme's website in its Session, over TLS.

The agent's own browser (the SDK's ``ControlledBrowser``: its own cookie jar, following
redirects) form-posts the assertion ``BrowserSessionClient`` signed and lands on
``return_to`` in a Django session carrying the Session (no Django login): a visitor while
signed out, the account's user with the Session's scopes signed in on the pages that opt in.
A sign-out makes it a visitor at its next request; an ended Session ends that browser
session. (The escalations a joined browser is refused run against the example project as
shipped: test_least_privilege.py.) Hostile assertions are refused with a JSON 400
and no cookie, nothing changed.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from django.contrib.sessions.models import Session as DjangoSession
from personal_agent_protocol.demo.sockets import served_over_tls

from poppy_django.authority.models import Client, Session
from tests.authority.channels import BROWSER_ENDPOINT, ChannelAgent, browser_claims, sign
from tests.authority.driver import PASSWORD
from tests.authority.sdk_agent import ORIGIN, World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]

SESSION_PAGE = f"{ORIGIN}/account/session"
ORDERS_PAGE = f"{ORIGIN}/account/orders"


def over_tls(world: World, scenario: Callable[[], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        async with served_over_tls(world.network):
            await world.discover()
            return await scenario()

    return asyncio.run(run())


def test_poppy_json_announces_the_browser_session_endpoint(world: World) -> None:
    company = asyncio.run(world.discover())
    assert company.document.web.browser_session_endpoint == BROWSER_ENDPOINT


def test_a_signed_out_session_browses_as_a_visitor(world: World) -> None:
    agent = ChannelAgent(world)
    user = "usr_browser_visitor_0001"

    async def scenario() -> Any:
        session = await agent.session(user)
        return await agent.join(user, session.session_id, SESSION_PAGE)

    landed = over_tls(world, scenario)
    assert landed.status_code == 200 and str(landed.url) == SESSION_PAGE
    joined = landed.history[0]
    assert joined.status_code == 303 and joined.headers["location"] == SESSION_PAGE
    cookie = joined.headers["set-cookie"]
    for flag in ("Secure", "HttpOnly", "SameSite=Lax"):
        assert flag in cookie
    assert "max-age" not in cookie.lower() and "expires" not in cookie.lower()
    assert 'data-signed-in="false"' in landed.text
    assert "browses as a visitor" in landed.text


def test_a_signed_in_session_is_the_accounts_user_with_its_scopes(
    world: World, customers: None
) -> None:
    agent = ChannelAgent(world)
    user = "usr_browser_signed_in_01"

    async def scenario() -> tuple[Any, Any, Any]:
        session = await agent.session(user)
        signed = await agent.sign_in(
            user, session, {"username": "acct-1", "password": PASSWORD}, ("poppy:read",)
        )
        landed = await agent.join(user, session.session_id, SESSION_PAGE)
        orders = await agent.browser.get(ORDERS_PAGE)
        return signed, landed, orders

    signed, landed, orders = over_tls(world, scenario)
    assert signed.status == "complete"
    assert 'data-signed-in="true"' in landed.text and 'data-scopes="poppy:read"' in landed.text
    assert "signed in as <strong>acct-1</strong>" in landed.text
    assert orders.status_code == 200
    assert 'data-order="A-1"' in orders.text and 'data-order="B-1"' not in orders.text


def test_a_page_the_sessions_scopes_do_not_cover_is_forbidden(
    world: World, customers: None
) -> None:
    agent = ChannelAgent(world)
    user = "usr_browser_write_only_1"

    async def scenario() -> Any:
        session = await agent.session(user)
        await agent.sign_in(
            user, session, {"username": "acct-2", "password": PASSWORD}, ("poppy:write",)
        )
        await agent.join(user, session.session_id, SESSION_PAGE)
        return await agent.browser.get(ORDERS_PAGE)

    orders = over_tls(world, scenario)
    assert orders.status_code == 403
    assert "poppy:read" in orders.text and "B-1" not in orders.text


def test_sign_out_makes_the_browser_a_visitor_at_its_next_request(
    world: World, customers: None, acme_settings: Any
) -> None:
    agent = ChannelAgent(world)
    user = "usr_browser_sign_out_01"

    async def scenario() -> tuple[Any, Any, Any]:
        session = await agent.session(user)
        signed = await agent.sign_in(
            user, session, {"username": "acct-1", "password": PASSWORD}, ("poppy:read",)
        )
        await agent.join(user, session.session_id, SESSION_PAGE)
        before = await agent.browser.get(ORDERS_PAGE)
        await agent.sign_out(user, signed.account_token_reference)
        after = await agent.browser.http.get(ORDERS_PAGE)
        page = await agent.browser.get(SESSION_PAGE)
        return before, after, page

    before, after, page = over_tls(world, scenario)
    assert before.status_code == 200
    assert after.status_code == 403 and "A-1" not in after.text  # poppy:read is gone
    assert 'data-signed-in="false"' in page.text and "browses as a visitor" in page.text


def test_an_ended_session_ends_the_visitors_browser_session_too(world: World) -> None:
    agent = ChannelAgent(world)
    user = "usr_browser_ended_000001"

    async def scenario() -> tuple[Any, Any]:
        session = await agent.session(user)
        joined = await agent.join(user, session.session_id, SESSION_PAGE)
        await asyncio.to_thread(
            lambda: Session.objects.filter(session_id=session.session_id).update(
                ended_at="2026-01-01T00:00:00Z"
            )
        )
        return joined, await agent.browser.get(SESSION_PAGE)

    joined, after = over_tls(world, scenario)
    assert "poppy-session" in joined.text
    assert "poppy-session" not in after.text and "browsing as a visitor" in after.text


def test_a_blocked_client_ends_its_browser_sessions(world: World) -> None:
    agent = ChannelAgent(world)
    user = "usr_browser_blocked_0001"

    async def scenario() -> Any:
        session = await agent.session(user)
        await agent.join(user, session.session_id, SESSION_PAGE)
        await asyncio.to_thread(lambda: Client.objects.update(status=Client.Status.BLOCKED))
        return await agent.browser.get(SESSION_PAGE)

    after = over_tls(world, scenario)
    assert "poppy-session" not in after.text


# Hostile assertions -------------------------------------------------------------------


def _post(world: World, assertion: Any, **headers: str) -> httpx.Response:
    """POST a form to the endpoint from a fresh browser (no cookies)."""

    async def send() -> httpx.Response:
        async with world.network.client() as http:
            return await http.post(
                BROWSER_ENDPOINT,
                content=urlencode({"assertion": assertion}).encode(),
                headers={"Content-Type": "application/x-www-form-urlencoded", **headers},
            )

    return asyncio.run(send())


@pytest.fixture
def visitor(world: World) -> tuple[str, str]:
    """A signed-out Session of Atlas: (user, session_id)."""
    agent = ChannelAgent(world)
    user = "usr_browser_hostile_0001"

    async def scenario() -> Any:
        await world.discover()
        return await agent.session(user)

    return user, asyncio.run(scenario()).session_id


def _refused(response: httpx.Response, error: str) -> None:
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"] == error
    assert "set-cookie" not in response.headers
    assert response.headers["cache-control"].startswith("no-store") or (
        "no-store" in response.headers["cache-control"]
    )


def test_a_valid_assertion_joins_once_and_its_replay_is_refused(
    world: World, visitor: tuple[str, str]
) -> None:
    user, session_id = visitor
    assertion = sign(world, browser_claims(world, user, session_id))
    first = _post(world, assertion)
    assert first.status_code == 303 and "sessionid" in first.headers["set-cookie"]
    stored = DjangoSession.objects.count()
    _refused(_post(world, assertion), "invalid_browser_assertion")
    assert DjangoSession.objects.count() == stored


@pytest.mark.parametrize(
    ("what", "changes", "error"),
    [
        ("expired", {"iat": 1_700_000_000, "exp": 1_700_000_060}, "invalid_browser_assertion"),
        ("long-lived", {"exp": "LIFETIME:600"}, "invalid_browser_assertion"),
        ("wrong aud", {"aud": f"{ORIGIN}/poppy/elsewhere"}, "invalid_browser_assertion"),
        ("aud an array", {"aud": [BROWSER_ENDPOINT]}, "invalid_browser_assertion"),
        ("another user", {"sub": "usr_someone_else_00001"}, "invalid_session"),
        ("unknown session", {"session_id": "ses_unknown"}, "invalid_session"),
        ("short jti", {"jti": "abc"}, "invalid_browser_assertion"),
        ("another host", {"return_to": "https://evil.example/"}, "invalid_return_to"),
        (
            "a lookalike host",
            {"return_to": "https://acme.example.evil.example/"},
            "invalid_return_to",
        ),
        ("a suffix host", {"return_to": "https://notacme.example/"}, "invalid_return_to"),
        ("scheme-relative", {"return_to": "//evil.example/"}, "invalid_return_to"),
        ("http", {"return_to": "http://acme.example/"}, "invalid_return_to"),
        ("backslashes", {"return_to": "https://acme.example\\@evil.example/"}, "invalid_return_to"),
        (
            "backslash path",
            {"return_to": "https://acme.example/\\\\evil.example"},
            "invalid_return_to",
        ),
        ("userinfo", {"return_to": "https://acme.example@evil.example/"}, "invalid_return_to"),
        ("userinfo on us", {"return_to": "https://user:pw@acme.example/"}, "invalid_return_to"),
        ("javascript", {"return_to": "javascript:alert(1)"}, "invalid_return_to"),
        (
            "a newline",
            {"return_to": "https://acme.example/\nLocation: https://evil.example"},
            "invalid_return_to",
        ),
        ("another port", {"return_to": "https://acme.example:8443/"}, "invalid_return_to"),
        ("no return_to", {"return_to": None}, "invalid_return_to"),
    ],
)
def test_hostile_assertions_are_refused_and_change_nothing(
    world: World, visitor: tuple[str, str], what: str, changes: dict[str, Any], error: str
) -> None:
    user, session_id = visitor
    claims = browser_claims(world, user, session_id)
    if changes.get("exp") == "LIFETIME:600":
        changes = {"exp": claims["iat"] + 600}
    claims.update(changes)
    if claims.get("return_to") is None:
        del claims["return_to"]
    _refused(_post(world, sign(world, claims)), error)
    assert DjangoSession.objects.count() == 0


def test_forged_assertions_are_refused(world: World, visitor: tuple[str, str]) -> None:
    user, session_id = visitor
    claims = browser_claims(world, user, session_id)
    stranger = ec.generate_private_key(ec.SECP256R1())
    forged = {
        "another key": sign(world, claims, key=stranger),
        "a Session assertion's type": sign(world, claims, typ="JWT"),
        "no type": sign(world, claims, typ=None),
        "an unknown kid": sign(world, claims, kid="key-404"),
        "not a JWT": "not.a.jwt",
        "empty": "",
        "huge": "a" * 10_000,
        "alg none": _unsigned(claims),
        "an issuer with a NUL": sign(
            world, {**claims, "iss": "https://atlas.example/\x00agent.json"}
        ),
        "an issuer that is no text": jwt.api_jws.encode(
            json.dumps({**claims, "iss": 7}).encode(),
            world.atlas.private_key,
            algorithm="ES256",
            headers={"typ": "poppy-browser+jwt", "kid": world.atlas.kid},
        ),
        "another issuer": sign(
            world, {**claims, "iss": "https://evil.example/agent.json"}, key=stranger
        ),
    }
    for what, assertion in forged.items():
        response = _post(world, assertion)
        assert response.status_code == 400, (what, response.status_code, response.text)
        assert "set-cookie" not in response.headers, what
    assert DjangoSession.objects.count() == 0


def _unsigned(claims: dict[str, Any]) -> str:
    def part(value: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none', 'typ': 'poppy-browser+jwt'})}.{part(claims)}."


def test_a_refused_assertion_leaves_the_browsers_own_session_as_it_was(
    world: World, visitor: tuple[str, str]
) -> None:
    """A browser already in a Session posts a bad assertion: it stays in its Session."""
    user, session_id = visitor

    async def scenario() -> tuple[httpx.Response, httpx.Response]:
        async with world.network.client() as http:
            form = {"Content-Type": "application/x-www-form-urlencoded"}
            good = sign(world, browser_claims(world, user, session_id))
            await http.post(BROWSER_ENDPOINT, content=urlencode({"assertion": good}), headers=form)
            bad = sign(world, browser_claims(world, user, session_id, aud=ORIGIN))
            refused = await http.post(
                BROWSER_ENDPOINT, content=urlencode({"assertion": bad}), headers=form
            )
            return refused, await http.get(SESSION_PAGE)

    refused, page = asyncio.run(scenario())
    assert refused.status_code == 400 and "set-cookie" not in refused.headers
    assert 'data-signed-in="false"' in page.text


def test_other_methods_and_bodies_are_clear_errors(world: World) -> None:
    async def scenario() -> tuple[httpx.Response, httpx.Response]:
        async with world.network.client() as http:
            get = await http.get(BROWSER_ENDPOINT)
            as_json = await http.post(BROWSER_ENDPOINT, json={"assertion": "x"})
            return get, as_json

    get, as_json = asyncio.run(scenario())
    assert get.status_code == 405 and get.headers["allow"] == "POST"
    assert as_json.status_code == 400 and as_json.json()["error"] == "invalid_request"


def test_refusals_log_no_assertion(
    world: World, visitor: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    user, session_id = visitor
    assertion = sign(
        world, browser_claims(world, user, session_id, return_to="https://evil.example/")
    )
    with caplog.at_level(logging.DEBUG):
        _refused(_post(world, assertion), "invalid_return_to")
    assert assertion not in caplog.text and "evil.example" not in caplog.text
