"""Least privilege on every channel, against the example project as shipped (issue 43).

Acme runs as :mod:`tests.authority.shipped` starts it (production mode: uvicorn over TLS, a
Celery worker, PostgreSQL, Redis; no setting overridden). A personal agent built from the
SDK's public clients signs in with a narrow scope, then uses the browser it controls, joined
to its Session, to try for more: every escalation is refused, while the pages that opt in
still see the Session's account with the Session's scopes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from personal_agent_protocol import DeviceSignInClient

from tests.authority.driver import AcmeUser
from tests.authority.sdk_agent import TENANT
from tests.authority.shipped import ORIGIN, PASSWORD, ShippedAcme, shipped_acme
from tests.authority.shipped_agent import ATLAS, PLAIN, Agent

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]
STAFF = "staff-1"
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
#: Customers whose accounts change (one each): their agent sign-ins must end.
CHANGERS = {"password page": "acct-ch-1", "password reset": "acct-ch-2", "deactivated": "acct-ch-3"}
NEW_PASSWORD = "a-new-password-for-acme"
_MAKE_STAFF = (
    "from django.contrib.auth.models import User; "
    f"User.objects.create_superuser({STAFF!r}, password={PASSWORD!r}); "
    f"[User.objects.create_user(name, password={PASSWORD!r}) "
    f"for name in {sorted(CHANGERS.values())!r}]"
)
#: What the operator's shell does to an account: a password reset (what Django's
#: SetPasswordForm.save does) and a deactivation (what the admin's save does).
_OPERATOR = {
    "password reset": (
        "from django.contrib.auth.models import User; u = User.objects.get(username={name!r}); "
        f"u.set_password({NEW_PASSWORD!r}); u.save()"
    ),
    "deactivated": (
        "from django.contrib.auth.models import User; u = User.objects.get(username={name!r}); "
        "u.is_active = False; u.save()"
    ),
}


@pytest.fixture(scope="module")
def acme(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShippedAcme]:
    with shipped_acme(Path(tmp_path_factory.mktemp("acme")), [ATLAS, PLAIN]) as running:
        running.manage("shell", "-c", _MAKE_STAFF)
        yield running
        problems = running.log_problems()
    assert not problems, "\n".join(problems[:40])


async def post_form(
    browser: httpx.AsyncClient, path: str, form: list[tuple[str, str]]
) -> httpx.Response:
    """A form post with a CSRF token the browser holds (read from Acme's login page)."""
    page = await browser.get(f"{ORIGIN}/account/login")
    found = _CSRF.search(page.text)
    assert found, page.text
    return await browser.post(
        ORIGIN + path,
        content=urlencode([("csrfmiddlewaretoken", found.group(1)), *form]).encode(),
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": ORIGIN,
            "Referer": f"{ORIGIN}/account/login",
        },
    )


def to_login(response: httpx.Response) -> bool:
    """Sent to a login page: the browser is nobody there."""
    return response.status_code == 302 and "login" in response.headers["location"]


def test_the_joined_browser_cannot_approve_its_own_sign_in_for_more_scopes(
    acme: ShippedAcme,
) -> None:
    user = "usr_lp_more_scopes_000001"

    async def scenario() -> dict[str, Any]:
        atlas = Agent(acme)
        await atlas.discover()
        polled = await atlas.signed_in(user, "acct-1", ("poppy:read",))
        browser = await atlas.join(user, polled.token.session_id)
        seen: dict[str, Any] = {"orders_page": await browser.get(f"{ORIGIN}/account/orders")}
        # Device Sign-In for orders:read, approved by the agent's own browser.
        device = DeviceSignInClient(reactor=atlas.reactor, http_client=atlas.http)
        started = await device.begin(
            device_authorization_endpoint=atlas.metadata.device_authorization_endpoint,
            token_endpoint=atlas.metadata.token_endpoint,
            issuer=atlas.metadata.issuer,
            client_id=ATLAS.client_id,
            scopes=("poppy:read", "orders:read"),
            tenant_id=TENANT,
            pairwise_user_id=user,
            session_id=polled.token.session_id,
            organization=atlas.company.document.organization,
            poppy_domains=atlas.metadata.poppy_domains,
        )
        code = started.user_code
        seen["device_page"] = await browser.get(f"{ORIGIN}/device?user_code={code}")
        seen["device_approve"] = await post_form(
            browser,
            "/device",
            [("user_code", code), ("decision", "approve")]
            + [("scope", s) for s in ("poppy:read", "orders:read")],
        )
        await asyncio.sleep(started.poll_interval)
        seen["device_poll"] = await device.poll(started.reference)
        # Direct Sign-In for orders:read: the consent page in the agent's own browser.
        url = await atlas.authorization_url(user, polled.token, ("poppy:read", "orders:read"))
        seen["consent_page"] = await browser.get(url)
        seen["consent_approve"] = await browser.post(
            url,
            content=urlencode({"decision": "approve", "scope": "orders:read"}).encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": ORIGIN},
        )
        seen["api_orders"] = await atlas.transport.request(
            "GET", f"{ORIGIN}/api/orders", token=polled.token, **atlas.who(user)
        )
        return seen

    seen = asyncio.run(scenario())
    # The page that opts in (poppy:read) shows the Session's account.
    assert seen["orders_page"].status_code == 200 and "A-1" in seen["orders_page"].text
    assert to_login(seen["device_page"]) and to_login(seen["device_approve"])
    assert seen["device_poll"].status == "pending"
    assert to_login(seen["consent_page"])
    assert seen["consent_approve"].status_code in (302, 403)
    assert (
        not seen["consent_approve"]
        .headers.get("location", "")
        .startswith(ATLAS.metadata["redirect_uris"][0])
    )
    assert seen["api_orders"].status_code == 403  # orders:read was never granted


def test_the_joined_browser_cannot_approve_another_clients_sign_in(acme: ShippedAcme) -> None:
    user = "usr_lp_other_client_0001"

    async def scenario() -> httpx.Response:
        atlas, plain = Agent(acme), Agent(acme, PLAIN)
        await atlas.discover()
        await plain.discover()
        polled = await atlas.signed_in(user, "acct-1", ("poppy:read",))
        browser = await atlas.join(user, polled.token.session_id)
        other_session = await plain.session("usr_lp_plain_user_000001")
        url = await plain.authorization_url(
            "usr_lp_plain_user_000001", other_session, ("poppy:read", "orders:read")
        )
        return await browser.get(url)

    assert to_login(asyncio.run(scenario()))


def test_the_joined_browser_cannot_disconnect_the_accounts_other_agents(
    acme: ShippedAcme,
) -> None:
    user, other_user = "usr_lp_disconnect_000001", "usr_lp_disconnect_000002"

    async def scenario() -> tuple[httpx.Response, httpx.Response, Any]:
        atlas, plain = Agent(acme), Agent(acme, PLAIN)
        await atlas.discover()
        await plain.discover()
        polled = await atlas.signed_in(user, "acct-2", ("poppy:read",))
        other = await plain.signed_in(other_user, "acct-2", ("poppy:read",))
        browser = await atlas.join(user, polled.token.session_id)
        page = await browser.get(f"{ORIGIN}/account/agents")
        done = await post_form(browser, "/account/agents", [("client_id", PLAIN.client_id)])
        renewed = await plain.session(other_user, other.token.session_id)
        return page, done, renewed

    page, done, renewed = asyncio.run(scenario())
    assert to_login(page) and to_login(done)
    assert renewed.signed_in is True  # Plain is still connected


def test_a_staff_accounts_joined_browser_is_nobody_in_the_admin_desk_and_account_pages(
    acme: ShippedAcme,
) -> None:
    user = "usr_lp_staff_00000000001"

    async def scenario() -> dict[str, httpx.Response]:
        atlas = Agent(acme)
        await atlas.discover()
        polled = await atlas.signed_in(user, STAFF, ("poppy:read",))
        browser = await atlas.join(user, polled.token.session_id)
        return {
            path: await browser.get(ORIGIN + path)
            for path in (
                "/admin/",
                "/admin/auth/user/",
                "/admin/poppy_django/conversation/desk/",
                "/account/password",
                "/account/session",
            )
        }

    pages = asyncio.run(scenario())
    for path in ("/admin/", "/admin/auth/user/", "/admin/poppy_django/conversation/desk/"):
        assert to_login(pages[path]), (path, pages[path].status_code)
        assert "/admin/login/" in pages[path].headers["location"]
    assert to_login(pages["/account/password"])
    session = pages["/account/session"]
    assert 'data-signed-in="true"' in session.text and f"<strong>{STAFF}</strong>" in session.text


def test_a_browser_joined_signed_out_follows_its_sessions_sign_in_and_sign_out(
    acme: ShippedAcme,
) -> None:
    user = "usr_lp_follows_000000001"

    async def scenario() -> list[httpx.Response]:
        atlas = Agent(acme)
        await atlas.discover()
        session = await atlas.session(user)
        browser = await atlas.join(user, session.session_id)
        pages = [await browser.get(f"{ORIGIN}/account/session")]
        polled = await atlas.device_sign_in(user, session, "acct-1", ("poppy:read",))
        pages += [
            await browser.get(f"{ORIGIN}/account/session"),
            await browser.get(f"{ORIGIN}/account/orders"),
        ]
        await atlas.sign_out(user, polled.account_token_reference)
        pages += [
            await browser.get(f"{ORIGIN}/account/session"),
            await browser.get(f"{ORIGIN}/account/orders"),
        ]
        return pages

    visitor, signed_in, orders, signed_out, orders_after = asyncio.run(scenario())
    assert 'data-signed-in="false"' in visitor.text
    assert 'data-signed-in="true"' in signed_in.text
    assert 'data-scopes="poppy:read"' in signed_in.text
    assert orders.status_code == 200 and "A-1" in orders.text
    assert 'data-signed-in="false"' in signed_out.text
    assert orders_after.status_code == 403 and "A-1" not in orders_after.text


@pytest.mark.parametrize("change", sorted(CHANGERS))
def test_an_account_change_ends_its_agent_sign_ins(acme: ShippedAcme, change: str) -> None:
    account = CHANGERS[change]
    user = f"usr_lp_change_{account}"
    orders = f"{ORIGIN}/api/orders"

    async def scenario() -> dict[str, Any]:
        atlas = Agent(acme)
        await atlas.discover()
        polled = await atlas.signed_in(user, account, ("poppy:read", "orders:read"))
        browser = await atlas.join(user, polled.token.session_id)
        seen: dict[str, Any] = {
            "api_before": await atlas.dpop(user, polled.token, "GET", orders),
            "page_before": await browser.get(f"{ORIGIN}/account/session"),
        }
        if change == "password page":  # the person, on Acme's own page, in their own browser
            person = AcmeUser(acme.client, ORIGIN, PLAIN, password=PASSWORD).browser()
            done = await person.change_password(account, NEW_PASSWORD)
            assert done.status_code == 302, done.text[:300]
        else:
            await asyncio.to_thread(
                acme.manage, "shell", "-c", _OPERATOR[change].format(name=account)
            )
        seen["api_after"] = await atlas.dpop(user, polled.token, "GET", orders)
        seen["page_after"] = await browser.get(f"{ORIGIN}/account/session")
        seen["renewed"] = await atlas.session(user, polled.token.session_id)
        # The Account Token, refreshed: the SDK hears invalid_grant as signed out (no token).
        seen["account_token"] = await atlas.mcp_token(user, polled)
        return seen

    seen = asyncio.run(scenario())
    assert seen["api_before"].status_code == 200
    assert 'data-signed-in="true"' in seen["page_before"].text
    assert seen["api_after"].status_code in (401, 403), seen["api_after"].text
    assert 'data-signed-in="false"' in seen["page_after"].text
    assert seen["renewed"].signed_in is False
    assert seen["account_token"] is None


def test_a_write_with_an_idempotency_key_is_performed_once(acme: ShippedAcme) -> None:
    user = "usr_lp_idempotency_00001"
    key = {"Idempotency-Key": "c0ffee-retry-0001"}

    async def scenario() -> list[httpx.Response]:
        atlas = Agent(acme)
        await atlas.discover()
        polled = await atlas.signed_in(user, "acct-2", ("poppy:read", "poppy:write"))

        async def cancel(order_id: str, headers: dict[str, str]) -> httpx.Response:
            url = f"{ORIGIN}/api/orders/{order_id}/cancel"
            return await atlas.dpop(user, polled.token, "POST", url, b"{}", headers)

        return [
            await cancel("B-1", key),
            await cancel("B-1", key),
            await cancel("B-2", key),  # the same key for another write
            await cancel("B-1", {"Idempotency-Key": "bad key with spaces"}),
        ]

    first, again, other, malformed = asyncio.run(scenario())
    assert first.status_code == 202, first.text
    assert again.status_code == 202 and again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert other.status_code == 409 and other.json()["error"] == "idempotency_key_conflict"
    assert malformed.status_code == 400 and malformed.json()["error"] == "invalid_request"
