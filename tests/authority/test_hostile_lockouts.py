"""Mediated Sign-In's limits cannot be aimed at others (issue 51: R4), against the example
project as shipped (:mod:`tests.authority.shipped`: production mode, its limits as shipped;
a demo, so the one-time codes it e-mails are written under its ``var/outbox``). One setting
differs: a fast password hasher (:mod:`tests.authority.shipped_fast_hashing`). The limits
count attempts whatever a hash costs, and every wrong password here is hashed once (an
unknown account's too, against timing), over a hundred of them: PBKDF2's cost, not the rules', made
this module about two minutes of a loaded run.

OWASP's credential-stuffing guidance: slow down and step up, never a lockout anyone can
trigger for everyone. Past the limits an address or a client shares, a right password is
asked for the one-time code instead of refused; a burst of concurrent attempts is one strike;
and a client's failures lock an account for that client alone, so no agent can lock a User
out of the others. Every request here comes from one address (127.0.0.1), as agents sharing
an egress do.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from personal_agent_protocol.demo.kit import AgentIdentity
from personal_agent_protocol.mcp import McpDpopAuth

from tests.authority.shipped import ORIGIN, PASSWORD, ShippedAcme, shipped_acme
from tests.authority.shipped_agent import ATLAS, PLAIN, Agent

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]
WRONG = "Tr0ub4dor&3-not-the-password"
#: Shipped: POPPY_AUTHORITY's MEDIATED_WINDOW_SECONDS, MEDIATED_ADDRESS_MAX_FAILURES,
#: MEDIATED_CLIENT_MAX_FAILURES and MEDIATED_MAX_FAILURES.
WINDOW = 900
ADDRESS_LIMIT = 20
CLIENT_LIMIT = 100
OWN_LIMIT = 5
#: The shipped settings with a fast password hasher first (the module's docstring).
FAST_HASHING = "tests.authority.shipped_fast_hashing"
#: A personal agent of its own for the client's flood (no other test's failures counted).
CROWD = AgentIdentity(domain="crowd.example", name="Crowd")
#: Customers with an e-mail address (where their one-time codes go).
CUSTOMERS = ("acct-lo-real", "acct-lo-known", "acct-lo-burst", "acct-lo-target", "acct-lo-crowd")
_MAKE_CUSTOMERS = (
    "from django.contrib.auth.models import User; "
    f"[User.objects.create_user(n, email=n + '@example.com', password={PASSWORD!r}) "
    f"for n in {CUSTOMERS!r}]"
)


@pytest.fixture(scope="module")
def acme(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShippedAcme]:
    tmp, fast = Path(tmp_path_factory.mktemp("acme")), {"DJANGO_SETTINGS_MODULE": FAST_HASHING}
    with shipped_acme(tmp, [ATLAS, PLAIN, CROWD], fast) as running:
        running.manage("shell", "-c", _MAKE_CUSTOMERS)
        yield running
        problems = running.log_problems()
    assert not problems, "\n".join(problems[:40])


async def signed_in_agent(acme: ShippedAcme, identity: Any = ATLAS) -> Agent:
    agent = Agent(acme, identity)
    await agent.discover()
    return agent


def coming_from(address: str | None) -> dict[str, str]:
    """The client address the proxy in front reports for a request (``X-Forwarded-For``,
    which uvicorn takes from a proxy on loopback); none: the connection's own, loopback."""
    return {"X-Forwarded-For": address} if address else {}


async def hostile(
    agent: Agent, user: str, token: Any, account: str, password: str, address: str | None = None
) -> httpx.Response:
    """One Mediated Sign-In attempt as a hostile client sends it: its own proof and no
    client-side budget (the SDK's transport waits out a ``Retry-After`` before its next
    request to the company; a flood does not)."""
    url = f"{ORIGIN}/poppy/sign-in"
    auth = McpDpopAuth(token, url, reactor=agent.reactor, who=agent.who(user))
    body = {"scope": "poppy:read", "credentials": {"username": account, "password": password}}
    headers = {"Content-Type": "application/json", **coming_from(address)}
    return await agent.http.post(url, content=json.dumps(body).encode(), headers=headers, auth=auth)


async def attempt(agent: Agent, user: str, account: str, password: str) -> httpx.Response:
    """One hostile attempt from a new Session of ``user``."""
    return await hostile(agent, user, await agent.session(user), account, password)


async def sign_in_with_the_code(
    acme: ShippedAcme, agent: Agent, user: str, account: str, address: str | None = None
) -> tuple[httpx.Response, httpx.Response | None]:
    """The right password from a new Session (from ``address``, else loopback), then the
    e-mailed code if one is asked for: the first answer and the code's."""
    session = await agent.session(user)
    if address is None:
        first = await agent.mediated(user, session, account, PASSWORD)
    else:
        first = await hostile(agent, user, session, account, PASSWORD, address)
    if first.json().get("status") != "code_required":
        return first, None
    url = f"{ORIGIN}/poppy/sign-in/{first.json()['sign_in_id']}"
    code = json.dumps({"code": acme.emailed_code(account)}).encode()
    return first, await agent.dpop(user, session, "POST", url, code, coming_from(address))


def outcome(answer: httpx.Response) -> str:
    body = answer.json()
    return str(body.get("status") or body.get("error"))


def test_a_flood_from_one_address_steps_up_instead_of_refusing_other_agents(
    acme: ShippedAcme,
) -> None:
    async def scenario() -> dict[str, Any]:
        stuffer = await signed_in_agent(acme)
        outcomes = []
        for n in range(ADDRESS_LIMIT + 5):  # a list of accounts, one wrong password each
            user = f"usr_lo_stuffing_{n:08d}"
            outcomes.append(outcome(await attempt(stuffer, user, f"acct-lo-x{n}", WRONG)))
            if outcomes[-1] == "rate_limited":
                break
        seen: dict[str, Any] = {"stuffing": outcomes}
        # Another agent's User, at the same address, with the right password.
        other = await signed_in_agent(acme, PLAIN)
        seen["other"] = await sign_in_with_the_code(
            acme, other, "usr_lo_real_0000001", CUSTOMERS[0]
        )
        # The stuffer with a right password it learned: a code it cannot read, no sign-in.
        seen["stuffer_right"] = await attempt(
            stuffer, "usr_lo_stuffing_right_1", CUSTOMERS[1], PASSWORD
        )
        return seen

    seen = asyncio.run(scenario())
    stuffing = seen["stuffing"]
    assert stuffing[-1] == "rate_limited" and len(stuffing) <= ADDRESS_LIMIT + 1, stuffing
    asked, done = seen["other"]
    assert outcome(asked) == "code_required" and asked.json()["code"]["sent_to"], asked.text
    assert done is not None and outcome(done) == "complete" and done.json()["signed_in"]
    assert outcome(seen["stuffer_right"]) == "code_required"
    assert "refresh_token" not in seen["stuffer_right"].json()


def test_a_concurrent_burst_is_one_strike(acme: ShippedAcme) -> None:
    account = CUSTOMERS[2]

    async def scenario() -> tuple[list[httpx.Response], httpx.Response, Any]:
        burster = await signed_in_agent(acme)
        users = [f"usr_lo_burst_{n:08d}" for n in range(30)]
        sessions = [await burster.session(user) for user in users]
        burst = await asyncio.gather(
            *(
                hostile(burster, user, session, account, WRONG)
                for user, session in zip(users, sessions, strict=True)
            )
        )
        right = await attempt(burster, "usr_lo_burst_right_01", account, PASSWORD)
        other = await signed_in_agent(acme, PLAIN)
        return (
            list(burst),
            right,
            await sign_in_with_the_code(acme, other, "usr_lo_burst_pl", account),
        )

    burst, right, (asked, done) = asyncio.run(scenario())
    refused = [answer for answer in burst if outcome(answer) == "rate_limited"]
    assert len(refused) >= 25, [outcome(answer) for answer in burst]
    # One strike: the lockout is the window's, not doubled once per attempt past the limit.
    waits = [int(answer.headers["Retry-After"]) for answer in [*refused, right]]
    assert max(waits) <= WINDOW, waits
    assert outcome(right) == "rate_limited"  # this client is locked out of the account
    assert outcome(asked) == "code_required"  # another agent is not: it steps up
    assert done is not None and outcome(done) == "complete"


def test_no_client_can_lock_a_user_out_of_every_agent(acme: ShippedAcme) -> None:
    account = CUSTOMERS[3]

    async def scenario() -> tuple[list[str], Any]:
        guesser = await signed_in_agent(acme)
        outcomes = [
            outcome(await attempt(guesser, f"usr_lo_target_{n:08d}", account, WRONG))
            for n in range(6)
        ]
        outcomes.append(outcome(await attempt(guesser, "usr_lo_target_right", account, PASSWORD)))
        other = await signed_in_agent(acme, PLAIN)
        return outcomes, await sign_in_with_the_code(acme, other, "usr_lo_target_pl_01", account)

    outcomes, (asked, done) = asyncio.run(scenario())
    # Failed, or slowed down by the address's earlier flood; locked out for this client.
    assert set(outcomes[:5]) <= {"failed", "rate_limited"} and outcomes[5:] == ["rate_limited"] * 2
    assert outcome(asked) == "code_required", asked.text
    assert done is not None and outcome(done) == "complete" and done.json()["signed_in"]


def test_a_flood_from_one_client_steps_up_its_other_users_instead_of_refusing_them(
    acme: ShippedAcme,
) -> None:
    """A client's wrong passwords past its limit, spread over Users, accounts and addresses
    (each under its own limit, as a botnet behind one personal agent would): its next wrong
    password is slowed down, and a right one of another of its Users, which signed in without
    a code before the flood, must prove the code now and signs in with it. Another client at
    a fresh address is not charged for the flood."""
    account, real_user, at_home = CUSTOMERS[4], "usr_lo_crowd_real_001", "203.0.113.7"
    per_user = OWN_LIMIT - 1  # wrong passwords a User may try before its own lockout

    async def scenario() -> dict[str, Any]:
        crowd = await signed_in_agent(acme, CROWD)
        seen: dict[str, Any] = {
            "first": await sign_in_with_the_code(acme, crowd, real_user, account, at_home),
            "usual": await sign_in_with_the_code(acme, crowd, real_user, account, at_home),
        }
        flood: list[str] = []
        for n in range(CLIENT_LIMIT // per_user + 2):
            user, address = f"usr_lo_crowd_{n:08d}", f"198.51.100.{n // per_user + 1}"
            session = await crowd.session(user)
            for k in range(per_user):
                wrong = await hostile(crowd, user, session, f"acct-lo-c{n}-{k}", WRONG, address)
                flood.append(outcome(wrong))
                if flood[-1] != "failed":
                    break
            if flood[-1] != "failed":
                break
        seen["flood"] = flood
        seen["stepped_up"] = await sign_in_with_the_code(acme, crowd, real_user, account, at_home)
        plain = await signed_in_agent(acme, PLAIN)
        other = await plain.session("usr_lo_crowd_plain_01")
        seen["other_client"] = await hostile(
            plain, "usr_lo_crowd_plain_01", other, "acct-lo-nobody", WRONG, "192.0.2.1"
        )
        return seen

    seen = asyncio.run(scenario())
    asked, done = seen["first"]  # the client's first sign-in to the account: a code
    assert outcome(asked) == "code_required" and done is not None and outcome(done) == "complete"
    usual, _ = seen["usual"]  # its next: none
    assert outcome(usual) == "complete" and usual.json()["signed_in"], usual.text
    flood = seen["flood"]
    assert flood[-1] == "rate_limited", flood
    assert set(flood[:-1]) == {"failed"} and CLIENT_LIMIT <= len(flood) <= CLIENT_LIMIT + 1
    asked, done = seen["stepped_up"]
    assert outcome(asked) == "code_required", asked.text
    assert done is not None and outcome(done) == "complete" and done.json()["signed_in"]
    assert outcome(seen["other_client"]) == "failed"
