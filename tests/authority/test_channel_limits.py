"""Every channel's limits hold against the example project as shipped (issue 43).

Acme runs as :mod:`tests.authority.shipped` starts it (production mode: uvicorn over TLS, a
Celery worker, PostgreSQL, Redis; no setting overridden). Hostile clients speak raw HTTP/1.1
over TLS where an HTTP library would not let them misbehave (a body declared larger than it
is sent, a body that never finishes).
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.authority.shipped import ACCOUNTS, DOMAIN, ORIGIN, PASSWORD, ShippedAcme, shipped_acme
from tests.authority.shipped_agent import ATLAS, Agent

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]
WRONG = "Tr0ub4dor&3-not-the-password"
#: Shipped: POPPY_AUTHORITY's MEDIATED_MAX_FAILURES and MEDIATED_ADDRESS_MAX_FAILURES.
SIGN_IN_LIMIT = 5
ADDRESS_LIMIT = 20
#: Every channel route that takes a body (one of each kind), and what it is sent as.
CHANNEL_ROUTES = [
    ("/poppy/conversations", "application/json"),
    ("/poppy/mcp", "application/json"),
    ("/poppy/operations/op_00000000000000000000000000/confirm", "application/json"),
    ("/poppy/feedback", "application/json"),
    ("/poppy/sign-in", "application/json"),
    ("/poppy/sign-in/msi_0000000000000000000000", "application/json"),
    ("/poppy/browser-session", "application/x-www-form-urlencoded"),
    ("/oauth/token", "application/x-www-form-urlencoded"),
]
#: Two customers only the mismatch test signs in as (the others' counters are spent).
MISMATCH = ("acct-mm-1", "acct-mm-2")
_MORE_CUSTOMERS = (
    "from django.contrib.auth.models import User; "
    f"[User.objects.create_user(name, password={PASSWORD!r}) for name in {MISMATCH!r}]"
)
#: Shipped: POPPY["BODY_READ_SECONDS"]'s default. The bound below is a deadline, not a speed.
READ_SECONDS = 20


@pytest.fixture(scope="module")
def acme(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShippedAcme]:
    with shipped_acme(Path(tmp_path_factory.mktemp("acme")), [ATLAS]) as running:
        running.manage("shell", "-c", _MORE_CUSTOMERS)
        yield running


async def raw_request(
    acme: ShippedAcme, head: str, body: bytes, *, wait: float
) -> tuple[int, bytes, float]:
    """Send ``head`` and ``body`` over TLS and keep the connection open; the answer's status,
    its bytes, and how long it took to come (``wait``: the most seconds waited for it)."""
    context: ssl.SSLContext = acme.authority.context()
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", acme.port, ssl=context, server_hostname=DOMAIN
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        writer.write(head.encode() + body)
        await writer.drain()
        answer = b""
        while not _whole(answer):
            more = await asyncio.wait_for(reader.read(65536), wait)
            if not more:
                break
            answer += more
    finally:
        writer.close()
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0
    return status, answer, loop.time() - started


def _whole(answer: bytes) -> bool:
    """The answer's head and as much body as its ``content-length`` says are in."""
    head_part, separator, body = answer.partition(b"\r\n\r\n")
    if not separator:
        return False
    found = re.search(rb"(?im)^content-length: *(\d+)", head_part)
    return found is None or len(body) >= int(found.group(1))


def head(path: str, content_type: str, *headers: str) -> str:
    lines = [f"POST {path} HTTP/1.1", f"Host: {DOMAIN}", f"Content-Type: {content_type}"]
    return "\r\n".join([*lines, *headers]) + "\r\n\r\n"


def outcome(answer: httpx.Response) -> str:
    """``failed``/``complete`` (the credentials were checked) or the error refusing them."""
    body = answer.json()
    return str(body.get("status") or body.get("error"))


# The sign-in tests run in this order on one deployment: each charges the address's counter
# (every request comes from 127.0.0.1) no more than the next one allows for.


def test_concurrent_sign_in_attempts_check_at_most_the_limit(acme: ShippedAcme) -> None:
    user = "usr_limits_concurrent_001"

    async def scenario() -> list[str]:
        atlas = Agent(acme)
        await atlas.discover()
        session = await atlas.session(user)
        tries = [WRONG] * 15 + [PASSWORD]
        answers = await asyncio.gather(
            *(atlas.mediated(user, session, ACCOUNTS[0], password) for password in tries)
        )
        return [outcome(answer) for answer in answers]

    outcomes = asyncio.run(scenario())
    checked = [o for o in outcomes if o in ("failed", "complete")]
    assert 1 <= len(checked) <= SIGN_IN_LIMIT, outcomes
    assert outcomes.count("rate_limited") == len(outcomes) - len(checked)


def test_another_accounts_right_password_is_counted(acme: ShippedAcme) -> None:
    user = "usr_limits_mismatch_00001"

    async def scenario() -> list[str]:
        atlas = Agent(acme)
        await atlas.discover()
        session = await atlas.session(user)
        signed = await atlas.mediated(user, session, MISMATCH[0], PASSWORD)
        assert outcome(signed) == "complete", signed.text
        again = await atlas.session(user, session.session_id)  # the Session, signed in
        return [
            outcome(await atlas.mediated(user, again, MISMATCH[1], PASSWORD))
            for _ in range(SIGN_IN_LIMIT + 1)
        ]

    outcomes = asyncio.run(scenario())
    assert outcomes == ["account_mismatch"] * SIGN_IN_LIMIT + ["rate_limited"]
    log = (acme.tmp / "web.log").read_text()
    assert f"another account's credentials for a Session of {ATLAS.client_id}" in log
    assert PASSWORD not in log


def test_credential_stuffing_across_sessions_is_refused(acme: ShippedAcme) -> None:
    """One password tried on many accounts, a fresh Session and User for each try."""

    async def scenario() -> list[str]:
        atlas = Agent(acme)
        await atlas.discover()
        outcomes: list[str] = []
        for n in range(50):
            user = f"usr_limits_stuffing_{n:05d}"
            session = await atlas.session(user)
            outcomes.append(outcome(await atlas.mediated(user, session, f"acct-{n}", WRONG)))
            if outcomes[-1] == "rate_limited":
                break
        return outcomes

    outcomes = asyncio.run(scenario())
    assert outcomes[-1] == "rate_limited", outcomes
    assert set(outcomes[:-1]) == {"failed"} and len(outcomes) <= ADDRESS_LIMIT + 1


def test_a_body_declared_over_the_limit_is_refused_before_it_is_sent(acme: ShippedAcme) -> None:
    async def scenario() -> list[tuple[int, bytes, float]]:
        return list(
            await asyncio.gather(
                *(
                    raw_request(
                        acme,
                        head(path, kind, "Content-Length: 419430400"),
                        b"{" * 1024,
                        wait=10,
                    )
                    for path, kind in CHANNEL_ROUTES
                )
            )
        )

    for (path, _), (status, answer, _) in zip(CHANNEL_ROUTES, asyncio.run(scenario()), strict=True):
        assert status == 413, (path, answer[:300])
        assert b'"request_too_large"' in answer


def test_a_chunked_body_is_cut_at_the_routes_limit(acme: ShippedAcme) -> None:
    chunk = b"x" * 65536
    stream = (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * 40  # 2.5 MiB, past every limit

    async def scenario() -> list[tuple[int, bytes, float]]:
        return list(
            await asyncio.gather(
                *(
                    raw_request(
                        acme, head(path, kind, "Transfer-Encoding: chunked"), stream, wait=30
                    )
                    for path, kind in CHANNEL_ROUTES
                )
            )
        )

    for (path, _), (status, answer, _) in zip(CHANNEL_ROUTES, asyncio.run(scenario()), strict=True):
        assert status == 413, (path, answer[:300])


def test_a_body_that_never_finishes_is_not_waited_on(acme: ShippedAcme) -> None:
    async def scenario() -> list[tuple[int, bytes, float]]:
        return list(
            await asyncio.gather(
                *(
                    raw_request(
                        acme,
                        head(path, kind, "Content-Length: 100"),
                        b'{"a": 1',
                        wait=READ_SECONDS + 30,
                    )
                    for path, kind in CHANNEL_ROUTES
                )
            )
        )

    for (path, _), (status, answer, _) in zip(CHANNEL_ROUTES, asyncio.run(scenario()), strict=True):
        assert status == 408, (path, answer[:300])
        assert b"request_timeout" in answer


def _connections(acme: ShippedAcme) -> int:
    """PostgreSQL connections open to the deployment's database now."""
    rows = acme.cluster.pg(
        f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{acme.cluster.name}'"
    )
    return int(rows[0][0])


def test_a_burst_on_each_channel_is_served_within_the_configured_connections(
    acme: ShippedAcme,
) -> None:
    """50 requests at once on each channel route: the web process's connections grow by at
    most ``POPPY["CHANNEL_THREADS"]`` (8, shipped), whatever the burst."""
    burst = 50

    async def scenario() -> tuple[int, int, list[int]]:
        atlas = Agent(acme)
        await atlas.discover()
        user = "usr_limits_burst_0000001"
        session = await atlas.session(user)
        feedback = json.dumps(
            {"kind": "missing", "task": "track a parcel", "description": "burst"}
        ).encode()

        async def report() -> httpx.Response:
            return await atlas.transport.request(
                "POST",
                f"{ORIGIN}/poppy/feedback",
                token=session,
                headers={"Content-Type": "application/json"},
                content=feedback,
                **atlas.who(user),
            )

        async def mcp(http: httpx.AsyncClient) -> httpx.Response:
            return await http.post(f"{ORIGIN}/poppy/mcp", json={"jsonrpc": "2.0", "id": 1})

        before = _connections(acme)
        statuses: list[int] = []
        async with acme.client() as http:
            rounds = [
                lambda: atlas.session(f"usr_limits_burst_{n:07d}") for n in range(2, burst + 2)
            ]
            started = await asyncio.gather(*(start() for start in rounds))
            statuses += [200 for _ in started]
            for make in (report, lambda: mcp(http)):
                answers = await asyncio.gather(*(make() for _ in range(burst)))
                statuses += [a.status_code for a in answers]
        return before, _connections(acme), statuses

    before, after, statuses = asyncio.run(scenario())
    assert not [s for s in statuses if s >= 500], statuses
    assert after - before <= 8, (before, after)
