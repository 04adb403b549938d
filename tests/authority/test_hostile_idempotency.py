"""``Idempotency-Key`` against replays across sign-ins, floods of keys and failed writes
(issue 51: R5, R10, R11), on the example project as shipped (:mod:`tests.authority.shipped`:
production mode, no setting overridden) and its order writes (``IdempotentWrites``).

R5: a replay is answered only to the sign-in that made the key (the same account, at least
its scopes): not after a sign-out, not to a read-only token, not to a Session of the same User
signed in to another account. R10: new keys are bounded per caller. R11: a write that met an
unhandled exception releases its key, so its retry is performed. Each test shows the
legitimate path beside the attack.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from personal_agent_protocol.mcp import McpDpopAuth

from tests.authority.shipped import ORIGIN, ShippedAcme, shipped_acme
from tests.authority.shipped_agent import ATLAS, Agent

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]
WRITE = ("poppy:read", "poppy:write")
#: Shipped: IdempotentWrites.idempotency_keys_per_caller.
KEYS_PER_CALLER = 100
#: What the failed-write test makes the deployment log on purpose (its one 500).
EXPECTED_PROBLEMS: list[str] = []


@pytest.fixture(scope="module")
def acme(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShippedAcme]:
    with shipped_acme(Path(tmp_path_factory.mktemp("acme")), [ATLAS]) as running:
        yield running
        problems = [p for p in running.log_problems() if p not in EXPECTED_PROBLEMS]
    assert not problems, "\n".join(problems[:40])


async def cancel(
    agent: Agent, user: str, token: Any, key: str, order_id: str = "A-1"
) -> httpx.Response:
    """The agent's write with ``key``: cancelling one of acct-1's orders (proposed)."""
    url = f"{ORIGIN}/api/orders/{order_id}/cancel"
    return await agent.dpop(user, token, "POST", url, b"{}", {"Idempotency-Key": key})


async def flooding_cancel(agent: Agent, user: str, token: Any, key: str) -> httpx.Response:
    """:func:`cancel` as a hostile client sends it: its own proof, no client-side budget (the
    SDK's transport waits out a ``Retry-After`` before its next request; a flood does not)."""
    url = f"{ORIGIN}/api/orders/A-1/cancel"
    auth = McpDpopAuth(token, url, reactor=agent.reactor, who=agent.who(user))
    headers = {"Content-Type": "application/json", "Idempotency-Key": key}
    return await agent.http.post(url, content=b"{}", headers=headers, auth=auth)


def test_a_replay_is_answered_only_to_the_sign_in_that_made_the_key(acme: ShippedAcme) -> None:
    user, key = "usr_idem_replay_00000001", "idem-replay-0001"

    async def scenario() -> dict[str, httpx.Response]:
        atlas = Agent(acme)
        await atlas.discover()
        writer = await atlas.signed_in(user, "acct-1", WRITE)
        seen = {
            "first": await cancel(atlas, user, writer.token, key),
            "retried": await cancel(atlas, user, writer.token, key),
        }
        # The same pairwise User's other Sessions: read-only, and another account.
        reader = await atlas.signed_in(user, "acct-1", ("poppy:read",))
        seen["read_only"] = await cancel(atlas, user, reader.token, key)
        seen["read_only_own_key"] = await cancel(atlas, user, reader.token, "idem-replay-0002")
        other = await atlas.signed_in(user, "acct-2", WRITE)
        seen["other_account"] = await cancel(atlas, user, other.token, key)
        await atlas.sign_out(user, writer.account_token_reference)
        seen["signed_out"] = await cancel(atlas, user, writer.token, key)
        return seen

    seen = asyncio.run(scenario())
    first, retried = seen["first"], seen["retried"]
    assert first.status_code == 202, first.text
    assert retried.json() == first.json() and retried.headers["Idempotent-Replayed"] == "true"
    operation_id = first.json()["operation"]["operation_id"]
    for name in ("read_only", "other_account", "signed_out"):
        refused = seen[name]
        assert refused.status_code == 409, (name, refused.text)
        assert refused.json()["error"] == "idempotency_key_conflict"
        assert operation_id not in refused.text and "Idempotent-Replayed" not in refused.headers
    # The read-only token's own write reaches the view, whose scope check refuses it.
    assert seen["read_only_own_key"].status_code == 403, seen["read_only_own_key"].text


def test_new_keys_are_bounded_per_caller(acme: ShippedAcme) -> None:
    user, other_user = "usr_idem_flood_000000001", "usr_idem_flood_000000002"

    async def scenario() -> tuple[list[httpx.Response], httpx.Response, httpx.Response]:
        atlas = Agent(acme)
        await atlas.discover()
        flooder = await atlas.signed_in(user, "acct-1", WRITE)
        answers = [
            await flooding_cancel(atlas, user, flooder.token, f"idem-flood-{n:04d}")
            for n in range(KEYS_PER_CALLER + 1)
        ]
        # A key already kept is still replayed past the bound.
        replayed = await flooding_cancel(atlas, user, flooder.token, "idem-flood-0000")
        other = await atlas.signed_in(other_user, "acct-1", WRITE)
        return answers, replayed, await cancel(atlas, other_user, other.token, "idem-flood-0000")

    answers, replayed, other = asyncio.run(scenario())
    assert answers[0].status_code == 202
    assert all(a.status_code in (202, 429) for a in answers[:-1])
    assert all(a.json().get("error") != "too_many_requests" for a in answers[:-1])
    refused = answers[-1]
    assert refused.status_code == 429 and refused.json()["error"] == "too_many_requests"
    assert 0 < int(refused.headers["Retry-After"]) <= 86400
    assert replayed.status_code == 202 and replayed.headers["Idempotent-Replayed"] == "true"
    assert other.status_code == 202 and "Idempotent-Replayed" not in other.headers


@contextlib.contextmanager
def failing_writes(acme: ShippedAcme) -> Iterator[None]:
    """The database refuses every new operation (a trigger raises, as a full disk or a
    broken constraint would): the write meets an unhandled exception."""
    url = f"postgresql://postgres@127.0.0.1:5432/{acme.cluster.name}"
    with psycopg.connect(url, autocommit=True) as database:
        database.execute(
            "CREATE FUNCTION poppy_test_refuse() RETURNS trigger AS "
            "$$ BEGIN RAISE EXCEPTION 'the test refuses this write'; END $$ LANGUAGE plpgsql"
        )
        database.execute(
            "CREATE TRIGGER poppy_test_refuse BEFORE INSERT ON poppy_django_operation "
            "FOR EACH ROW EXECUTE FUNCTION poppy_test_refuse()"
        )
        try:
            yield
        finally:
            database.execute("DROP TRIGGER poppy_test_refuse ON poppy_django_operation")
            database.execute("DROP FUNCTION poppy_test_refuse()")


def test_a_write_that_failed_releases_its_key(acme: ShippedAcme) -> None:
    user, key = "usr_idem_failed_00000001", "idem-failed-0001"
    before = acme.log_problems()

    async def scenario() -> list[httpx.Response]:
        atlas = Agent(acme)
        await atlas.discover()
        polled = await atlas.signed_in(user, "acct-1", WRITE)
        with failing_writes(acme):
            failed = await cancel(atlas, user, polled.token, key, "A-2")
        retried = await cancel(atlas, user, polled.token, key, "A-2")
        return [failed, retried, await cancel(atlas, user, polled.token, key, "A-2")]

    failed, retried, replayed = asyncio.run(scenario())
    EXPECTED_PROBLEMS.extend(p for p in acme.log_problems() if p not in before)
    assert failed.status_code == 500
    assert retried.status_code == 202, retried.text  # performed, not "still running"
    assert "Idempotent-Replayed" not in retried.headers
    assert replayed.json() == retried.json() and replayed.headers["Idempotent-Replayed"] == "true"
