"""Sign-ins that would outlive an account change (issue 51: R1 and R8), against the example
project as shipped (:mod:`tests.authority.shipped`: production mode, no setting overridden).

R1: a Device Sign-In approved but not yet polled, a Direct Sign-In code not yet exchanged
and a Mediated Sign-In waiting for its one-time code sign no one in after the account's
password changes or its user is deactivated (RFC 8628 §5.4: a User who approved a stranger's
device code changes the password, and the stranger's next poll must not sign in). R8: a
bulk ``update()`` that no signal reports (a script, a directory sync) ends use, refresh and
exchange all the same. Each test also shows the legitimate path still working: the User
signs in again with the new password, another account's agent goes on.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from personal_agent_protocol import DeviceSignInClient, DirectSignInClient
from personal_agent_protocol.errors import AuthorizationError

from tests.authority.driver import AcmeUser
from tests.authority.shipped import ORIGIN, PASSWORD, ShippedAcme, shipped_acme
from tests.authority.shipped_agent import ATLAS, PLAIN, Agent

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]
NEW_PASSWORD = "a-new-password-after-phishing"
#: One customer per test: each one's account changes. Each has an e-mail address (where a
#: Mediated Sign-In's one-time code goes).
CUSTOMERS = (
    "acct-ac-device",
    "acct-ac-direct",
    "acct-ac-off",
    "acct-ac-bulkpw",
    "acct-ac-ok",
    "acct-ac-med-page",
    "acct-ac-med-bulk",
    "acct-ac-deact",
    "acct-ac-control",
)
_MAKE_CUSTOMERS = (
    "from django.contrib.auth.models import User; "
    f"[User.objects.create_user(n, email=n + '@example.com', password={PASSWORD!r}) "
    f"for n in {CUSTOMERS!r}]"
)
ALL_SCOPES = ("poppy:read", "poppy:write", "orders:read")


@pytest.fixture(scope="module")
def acme(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShippedAcme]:
    with shipped_acme(Path(tmp_path_factory.mktemp("acme")), [ATLAS, PLAIN]) as running:
        running.manage("shell", "-c", _MAKE_CUSTOMERS)
        yield running
        problems = running.log_problems()
    assert not problems, "\n".join(problems[:40])


def bulk(acme: ShippedAcme, account: str, change: str) -> None:
    """An operator's bulk ``update()`` of the account's user: no ``save()``, no signal."""
    acme.manage(
        "shell",
        "-c",
        "from django.contrib.auth.hashers import make_password; "
        "from django.contrib.auth.models import User; "
        f"User.objects.filter(username={account!r}).update({change})",
    )


def deactivate(acme: ShippedAcme, account: str) -> None:
    """An operator deactivates the account's user the ordinary way: ``save()``, its signals
    sent (what the admin's change form does)."""
    acme.manage(
        "shell",
        "-c",
        "from django.contrib.auth.models import User; "
        f"user = User.objects.get(username={account!r}); "
        "user.is_active = False; user.save()",
    )


async def change_password_on_the_page(acme: ShippedAcme, account: str) -> None:
    """The person changes the password on Acme's own page, in their own browser."""
    person = AcmeUser(acme.client, ORIGIN, PLAIN, password=PASSWORD).browser()
    changed = await person.change_password(account, NEW_PASSWORD)
    assert changed.status_code == 302, changed.text[:300]


async def approved_device_code(
    agent: Agent, user: str, session: Any, account: str, password: str = PASSWORD
) -> tuple[DeviceSignInClient, Any]:
    """A Device Sign-In begun by ``agent`` and approved on Acme's page by ``account``'s
    person (who logs in with ``password``), not yet polled."""
    device, started = await agent.begin_device_sign_in(user, session, ALL_SCOPES)
    person = AcmeUser(agent.acme.client, ORIGIN, PLAIN, password=password)
    await person.approve_device(started.user_code, account=account, scopes=list(ALL_SCOPES))
    return device, started


async def refused_read(agent: Agent, user: str, token: Any) -> httpx.Response:
    """The first answer to the agent's read of its orders that is not 200, polled: a change
    made without a signal is seen within the session-status cache window (5 s as shipped);
    30 s is a bound for a busy machine, not a timing."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while True:
        answer = await agent.dpop(user, token, "GET", f"{ORIGIN}/api/orders")
        if answer.status_code != 200:
            return answer
        assert loop.time() < deadline, "the account's reads did not stop"
        await asyncio.sleep(0.2)


async def poll(agent: Agent, device: DeviceSignInClient, started: Any) -> Any:
    """The agent's poll (the interval passing on its clock): the result, or the refusal."""
    with agent.clock.passing(started.poll_interval):
        try:
            return await device.poll(started.reference)
        except AuthorizationError as refused:
            return refused


def test_a_device_approval_is_void_once_the_password_changes(acme: ShippedAcme) -> None:
    """The phishing remedy: the User approved a stranger's code, then changes the password."""
    account, user = "acct-ac-device", "usr_ac_device_stranger_01"

    async def scenario() -> tuple[Any, Any]:
        stranger = Agent(acme)
        await stranger.discover()
        session = await stranger.session(user)
        device, started = await approved_device_code(stranger, user, session, account)
        await change_password_on_the_page(acme, account)
        refused = await poll(stranger, device, started)
        # The User's own agent, approved with the new password, signs in.
        own = Agent(acme, PLAIN)
        await own.discover()
        own_user = "usr_ac_device_own_000001"
        own_session = await own.session(own_user)
        device, started = await approved_device_code(
            own, own_user, own_session, account, NEW_PASSWORD
        )
        return refused, await poll(own, device, started)

    refused, signed_in = asyncio.run(scenario())
    assert isinstance(refused, AuthorizationError) and refused.code == "access_denied", refused
    assert signed_in.status == "complete" and signed_in.token.signed_in


def test_a_direct_sign_in_code_is_void_once_the_password_changes(acme: ShippedAcme) -> None:
    account, user = "acct-ac-direct", "usr_ac_direct_stranger_01"

    async def scenario() -> tuple[AuthorizationError, Any]:
        atlas = Agent(acme)
        await atlas.discover()
        session = await atlas.session(user)
        direct = DirectSignInClient(reactor=atlas.reactor, http_client=atlas.http)
        url = await atlas.authorization_url(user, session, ("poppy:read",))
        callback = await atlas.user.approve_authorization(url, account=account)
        await change_password_on_the_page(acme, account)
        with pytest.raises(AuthorizationError) as refused:
            await direct.complete(callback)
        # Approved again by the person, with the new password: the code signs in.
        url = await atlas.authorization_url(user, session, ("poppy:read",))
        person = AcmeUser(acme.client, ORIGIN, PLAIN, password=NEW_PASSWORD)
        callback = await person.approve_authorization(url, account=account)
        return refused.value, await direct.complete(callback)

    refused, done = asyncio.run(scenario())
    assert refused.code == "invalid_grant", refused
    assert done.token.signed_in and done.token.session_id


async def code_asked(
    agent: Agent, user: str, session: Any, account: str, password: str = PASSWORD
) -> httpx.Response:
    """A Mediated Sign-In with the right password, waiting for the code e-mailed to the
    account's user (a client's first sign-in to an account always asks for one)."""
    asked = await agent.mediated(user, session, account, password)
    assert asked.json().get("status") == "code_required", asked.text
    return asked


async def submit_code(
    agent: Agent, user: str, session: Any, asked: httpx.Response, account: str
) -> httpx.Response:
    """The one-time code the account's user was last e-mailed, from the asking Session."""
    url = f"{ORIGIN}/poppy/sign-in/{asked.json()['sign_in_id']}"
    code = json.dumps({"code": agent.acme.emailed_code(account)}).encode()
    return await agent.dpop(user, session, "POST", url, code)


@pytest.mark.parametrize(
    ("account", "change"),
    [("acct-ac-med-page", "on the page"), ("acct-ac-med-bulk", "bulk update")],
)
def test_a_mediated_sign_in_waiting_for_its_code_is_void_once_the_password_changes(
    acme: ShippedAcme, account: str, change: str
) -> None:
    """The right password was relayed and the code is on its way; the person changes the
    password (on Acme's page, or an operator's bulk ``update()`` no signal reports) before the
    agent submits the code. The new password and a new code sign in."""
    user = f"usr_ac_{account.removeprefix('acct-ac-').replace('-', '_')}_000001"

    async def scenario() -> httpx.Response:
        atlas = Agent(acme)
        await atlas.discover()
        session = await atlas.session(user)
        asked = await code_asked(atlas, user, session, account)
        if change == "on the page":
            await change_password_on_the_page(acme, account)
        else:
            new = f"password=make_password({NEW_PASSWORD!r})"
            await asyncio.to_thread(bulk, acme, account, new)
        voided = await submit_code(atlas, user, session, asked, account)
        assert voided.json()["status"] == "failed", voided.text
        assert "refresh_token" not in voided.json()
        again = await code_asked(atlas, user, session, account, NEW_PASSWORD)
        return await submit_code(atlas, user, session, again, account)

    again = asyncio.run(scenario())
    assert again.json()["status"] == "complete" and again.json()["signed_in"], again.text


def test_a_deactivation_voids_every_approval_not_yet_used(acme: ShippedAcme) -> None:
    """The account's user deactivated through ``save()`` while a device approval waits for
    its poll, a Direct Sign-In code for its exchange and a Mediated Sign-In for its code: none
    signs in. The same three of another account, begun at the same time, all do."""
    account, control = "acct-ac-deact", "acct-ac-control"

    async def begun(atlas: Agent, account: str, tag: str) -> dict[str, Any]:
        """The three approvals of ``account``'s person, none used yet."""
        users = [f"usr_ac_{tag}_{kind}_00001" for kind in ("dev", "dir", "med")]
        sessions = [await atlas.session(user) for user in users]
        device, started = await approved_device_code(atlas, users[0], sessions[0], account)
        url = await atlas.authorization_url(users[1], sessions[1], ("poppy:read",))
        callback = await atlas.user.approve_authorization(url, account=account)
        asked = await code_asked(atlas, users[2], sessions[2], account)
        return {
            "device": (device, started),
            "callback": callback,
            "mediated": (users[2], sessions[2], asked),
        }

    async def used(atlas: Agent, account: str, approvals: dict[str, Any]) -> dict[str, Any]:
        """Each approval used: the poll, the code's exchange, the e-mailed code."""
        direct = DirectSignInClient(reactor=atlas.reactor, http_client=atlas.http)
        try:
            exchanged: Any = await direct.complete(approvals["callback"])
        except AuthorizationError as refused:
            exchanged = refused
        user, session, asked = approvals["mediated"]
        return {
            "poll": await poll(atlas, *approvals["device"]),
            "direct": exchanged,
            "mediated": await submit_code(atlas, user, session, asked, account),
        }

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        atlas = Agent(acme)
        await atlas.discover()
        deactivated = await begun(atlas, account, "deact")
        others = await begun(atlas, control, "control")
        await asyncio.to_thread(deactivate, acme, account)
        return await used(atlas, account, deactivated), await used(atlas, control, others)

    refused, signed_in = asyncio.run(scenario())
    poll_refused = refused["poll"]
    assert isinstance(poll_refused, AuthorizationError) and poll_refused.code == "access_denied"
    assert isinstance(refused["direct"], AuthorizationError), refused["direct"]
    assert refused["direct"].code == "invalid_grant"
    assert refused["mediated"].json()["status"] == "failed", refused["mediated"].text
    assert signed_in["poll"].status == "complete" and signed_in["poll"].token.signed_in
    assert signed_in["direct"].token.signed_in, signed_in["direct"]
    assert signed_in["mediated"].json()["status"] == "complete", signed_in["mediated"].text


def test_a_bulk_deactivation_ends_use_refresh_and_exchange(acme: ShippedAcme) -> None:
    """``User.objects.filter(...).update(is_active=False)``: no signal, yet the agent's reads,
    its confirmation of an operation, its Account Token and an approval not yet polled all
    stop; another account's agent goes on."""
    account, user = "acct-ac-off", "usr_ac_bulk_off_000001"
    control_user = "usr_ac_bulk_control_0001"
    orders = f"{ORIGIN}/api/orders"

    async def scenario() -> dict[str, Any]:
        atlas, plain = Agent(acme), Agent(acme, PLAIN)
        await atlas.discover()
        await plain.discover()
        polled = await atlas.signed_in(user, account, ALL_SCOPES)
        control = await plain.signed_in(control_user, "acct-ac-ok", ALL_SCOPES)
        proposed = await atlas.dpop(
            user, polled.token, "POST", f"{orders}/A-9/cancel", b"{}", {"Idempotency-Key": "k1"}
        )
        operation = proposed.json()["operation"]
        other_user = "usr_ac_bulk_off_000002"
        device, started = await approved_device_code(
            atlas, other_user, await atlas.session(other_user), account
        )
        seen: dict[str, Any] = {"before": await atlas.dpop(user, polled.token, "GET", orders)}
        await asyncio.to_thread(bulk, acme, account, "is_active=False")

        seen["after"] = await refused_read(atlas, user, polled.token)
        seen["confirm"] = await atlas.dpop(
            user,
            polled.token,
            "POST",
            f"{ORIGIN}/poppy/operations/{operation['operation_id']}/confirm",
            b'{"revision": %d, "approved_by": "user"}' % operation["revision"],
        )
        seen["refreshed"] = await atlas.mcp_token(user, polled)
        seen["poll"] = await poll(atlas, device, started)
        seen["control"] = await plain.dpop(control_user, control.token, "GET", orders)
        seen["control_refreshed"] = await plain.mcp_token(control_user, control)
        return seen

    seen = asyncio.run(scenario())
    assert seen["before"].status_code == 200
    assert seen["after"].status_code == 403 and seen["after"].json()["error"] == "sign_in_required"
    assert seen["confirm"].status_code == 403, seen["confirm"].text
    assert seen["refreshed"] is None  # the SDK hears invalid_grant as signed out
    assert isinstance(seen["poll"], AuthorizationError) and seen["poll"].code == "access_denied"
    assert seen["control"].status_code == 200
    assert seen["control_refreshed"] is not None


def test_a_bulk_password_change_ends_the_sign_in_and_the_new_password_signs_in(
    acme: ShippedAcme,
) -> None:
    account, user = "acct-ac-bulkpw", "usr_ac_bulk_password_01"
    orders = f"{ORIGIN}/api/orders"

    async def scenario() -> dict[str, Any]:
        atlas = Agent(acme)
        await atlas.discover()
        polled = await atlas.signed_in(user, account, ALL_SCOPES)
        await asyncio.to_thread(bulk, acme, account, f"password=make_password({NEW_PASSWORD!r})")

        seen: dict[str, Any] = {
            "after": await refused_read(atlas, user, polled.token),
            "refreshed": await atlas.mcp_token(user, polled),
        }
        session = await atlas.session(user)
        device, started = await approved_device_code(atlas, user, session, account, NEW_PASSWORD)
        again = await poll(atlas, device, started)
        seen["again"] = again
        seen["orders"] = await atlas.dpop(user, again.token, "GET", orders)
        return seen

    seen = asyncio.run(scenario())
    assert seen["after"].status_code == 403
    assert seen["refreshed"] is None
    assert seen["again"].status == "complete"
    assert seen["orders"].status_code == 200
