"""Mediated Sign-In: the SDK's mediated client signs a Session in over TLS, and no more.

The User types the declared fields into the agent host's protected input; the company checks
them with Django's ``authenticate()`` (the example as shipped) or a check that sends a
one-time code (``code_required``). Guessing is refused past the attempt limit per Session and
per account with ``429 rate_limited`` and ``Retry-After``; the password appears in no log,
no response and no row.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from django.db import connection
from personal_agent_protocol.demo.sockets import served_over_tls
from personal_agent_protocol.errors import AuthorizationError

from poppy_django.authority.models import MediatedSignIn, Session
from tests.authority import mediated_checks
from tests.authority.channels import ChannelAgent
from tests.authority.driver import PASSWORD
from tests.authority.sdk_agent import ORIGIN, TENANT, World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]

SIGN_IN = f"{ORIGIN}/poppy/sign-in"
WRONG = "Tr0ub4dor&3-not-the-password"


def over_tls(world: World, scenario: Callable[[], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        async with served_over_tls(world.network):
            await world.discover()
            return await scenario()

    return asyncio.run(run())


def test_poppy_json_declares_the_fields_and_the_endpoint(world: World) -> None:
    mediated = asyncio.run(world.discover()).document.auth.mediated
    assert mediated.endpoint == SIGN_IN
    assert [(f.name, f.secret) for f in mediated.fields] == [
        ("username", False),
        ("password", True),
    ]
    assert set(mediated.scopes) == {"poppy:read", "poppy:write", "orders:read"}


def test_the_sdk_signs_the_session_in_and_the_company_agent_serves_the_account(
    world: World, customers: None
) -> None:
    agent = ChannelAgent(world)
    user = "usr_mediated_user_000001"

    async def scenario() -> tuple[Any, Any, list[Any]]:
        session = await agent.session(user)
        done = await agent.sign_in(
            user, session, {"username": "acct-1", "password": PASSWORD}, ("poppy:read",)
        )
        return session, done, await agent.talk(user, done.token, "my orders please")

    session, done, events = over_tls(world, scenario)
    assert done.status == "complete"
    assert done.token.signed_in and done.token.session_id == session.session_id
    assert done.granted_scopes == ("poppy:read",)
    assert done.account_token_reference is not None
    stored = Session.objects.get(session_id=session.session_id)
    assert stored.account_id == "acct-1" and stored.grant.method == "mediated"
    replies = [
        e.message.text for e in events if e.type == "message" and e.message.role == "company"
    ]
    assert replies and "A-1" in replies[-1] and "B-1" not in replies[-1]


def test_a_wrong_password_fails_and_guessing_past_the_limit_is_refused(
    world: World, customers: None
) -> None:
    agent = ChannelAgent(world)
    user = "usr_mediated_guesser_001"

    async def scenario() -> tuple[list[str], AuthorizationError, AuthorizationError]:
        session = await agent.session(user)
        statuses = []
        for _ in range(5):
            result = await agent.sign_in(
                user, session, {"username": "acct-1", "password": WRONG}, ("poppy:read",)
            )
            statuses.append(result.status)
        with pytest.raises(AuthorizationError) as guessed:
            await agent.sign_in(
                user, session, {"username": "acct-1", "password": WRONG}, ("poppy:read",)
            )
        # Locked: even the right password is not checked now (a fresh agent, so that the
        # SDK's own rate-limit budget, which now waits for Retry-After, lets it through).
        fresh = ChannelAgent(world)
        again = await fresh.session(user)
        with pytest.raises(AuthorizationError) as right:
            await fresh.sign_in(
                user, again, {"username": "acct-1", "password": PASSWORD}, ("poppy:read",)
            )
        return statuses, guessed.value, right.value

    statuses, guessed, right = over_tls(world, scenario)
    assert statuses == ["failed"] * 5
    for refused in (guessed, right):
        assert refused.code == "rate_limited" and refused.status_code == 429
        assert 0 < int(refused.details["retry_after"]) <= 900
    assert not Session.objects.filter(grant__isnull=False).exists()


def test_the_account_limit_holds_across_sessions_and_spares_other_accounts(
    world: World, customers: None
) -> None:
    agent = ChannelAgent(world)

    async def scenario() -> tuple[AuthorizationError, Any]:
        for n in range(5):  # a new Session (and User) for each guess
            user = f"usr_mediated_spread_{n:05d}"
            session = await agent.session(user)
            result = await agent.sign_in(
                user, session, {"username": " ACCT-1 ", "password": WRONG}, ("poppy:read",)
            )
            assert result.status == "failed"
        user = "usr_mediated_spread_last1"
        session = await agent.session(user)
        with pytest.raises(AuthorizationError) as refused:
            await agent.sign_in(
                user, session, {"username": "acct-1", "password": PASSWORD}, ("poppy:read",)
            )
        fresh = ChannelAgent(world)  # the SDK's budget holds this one back now
        other_user = "usr_mediated_spread_other"
        other = await fresh.sign_in(
            other_user,
            await fresh.session(other_user),
            {"username": "acct-2", "password": PASSWORD},
            ("poppy:read",),
        )
        return refused.value, other

    refused, other = over_tls(world, scenario)
    assert refused.code == "rate_limited"
    assert other.status == "complete"


def test_a_code_required_sign_in_continues_with_the_code_from_the_same_session(
    world: World, customers: None, acme_settings: Any
) -> None:
    acme_settings.POPPY_AUTHORITY = {
        **acme_settings.POPPY_AUTHORITY,
        "MEDIATED_CHECK": "tests.authority.mediated_checks.with_a_code",
    }
    agent = ChannelAgent(world)
    user = "usr_mediated_code_000001"

    async def scenario() -> tuple[Any, Any, Any, Any]:
        session = await agent.session(user)
        asked = await agent.sign_in(
            user, session, {"username": "acct-2", "password": PASSWORD}, ("poppy:write",)
        )
        wrong = await agent.submit_code(user, session, asked.reference, "000000x")
        right = await agent.submit_code(
            user, session, asked.reference, mediated_checks.SENT["acct-2"]
        )
        return session, asked, wrong, right

    session, asked, wrong, right = over_tls(world, scenario)
    assert asked.status == "code_required" and asked.sent_to == "+1 *** *** 42"
    assert wrong.status == "code_required"
    assert right.status == "complete" and right.token.session_id == session.session_id
    assert right.granted_scopes == ("poppy:write",)
    record = MediatedSignIn.objects.get()
    assert record.status == "complete" and mediated_checks.SENT["acct-2"] not in record.code_hash


def test_wrong_codes_end_the_sign_in_as_failed(
    world: World, customers: None, acme_settings: Any
) -> None:
    acme_settings.POPPY_AUTHORITY = {
        **acme_settings.POPPY_AUTHORITY,
        "MEDIATED_CHECK": "tests.authority.mediated_checks.with_a_code",
    }
    agent = ChannelAgent(world)
    user = "usr_mediated_codes_00001"

    async def scenario() -> list[str]:
        session = await agent.session(user)
        asked = await agent.sign_in(
            user, session, {"username": "acct-2", "password": PASSWORD}, ("poppy:read",)
        )
        statuses = []
        for guess in ("111111", "222222", "333333"):
            statuses.append((await agent.submit_code(user, session, asked.reference, guess)).status)
        return statuses

    statuses = over_tls(world, scenario)
    assert statuses == ["code_required", "code_required", "failed"]
    assert not Session.objects.get().signed_in


# The credentials go nowhere -----------------------------------------------------------


def test_the_password_appears_in_no_log_no_response_and_no_row(
    world: World, customers: None, caplog: pytest.LogCaptureFixture
) -> None:
    agent = ChannelAgent(world)
    user = "usr_mediated_private_001"
    bodies = world.record_responses()

    async def scenario() -> None:
        session = await agent.session(user)
        await agent.sign_in(
            user, session, {"username": "acct-1", "password": WRONG}, ("poppy:read",)
        )
        await agent.sign_in(
            user, session, {"username": "acct-1", "password": PASSWORD}, ("poppy:read",)
        )

    with caplog.at_level(logging.DEBUG):
        over_tls(world, scenario)
        raw = _raw_refusals(world, agent, user)
    assert len(bodies) >= 2
    for secret in (WRONG, PASSWORD):
        assert secret not in caplog.text
        assert not any(secret in body for body in bodies + raw)
        assert not _in_any_row(secret)


def _raw_refusals(world: World, agent: ChannelAgent, user: str) -> list[str]:
    """Malformed requests carrying a password: each refused without repeating it."""

    async def send() -> list[str]:
        session = await agent.session(user)
        answers = []
        for body in (
            {"scope": "poppy:read", "credentials": {"username": "acct-1", "pw": PASSWORD}},
            {"scope": "nope", "credentials": {"username": "acct-1", "password": PASSWORD}},
            {"credentials": {"username": "acct-1", "password": PASSWORD}},
            {"scope": "poppy:read", "credentials": {"username": 7, "password": PASSWORD}},
            {"scope": "poppy:read", "credentials": {"username": "a\x00", "password": PASSWORD}},
            {"scope": "poppy:read", "credentials": {"username": "\ud800", "password": PASSWORD}},
        ):
            response = await agent.transport.request(
                "POST",
                SIGN_IN,
                token=session,
                tenant_id=TENANT,
                pairwise_user_id=user,
                issuer=ORIGIN,
                headers={"Content-Type": "application/json"},
                content=json.dumps(body).encode(),
            )
            assert response.status_code == 400, response.text
            answers.append(response.text)
        return answers

    async def run() -> list[str]:
        await world.discover()
        return await send()

    return asyncio.run(run())


def _in_any_row(secret: str) -> bool:
    """Whether any text column of any table holds ``secret``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' AND data_type IN ('text', 'character varying', 'jsonb')"
        )
        columns = cursor.fetchall()
        for table, column in columns:
            cursor.execute(
                f'SELECT 1 FROM "{table}" WHERE "{column}"::text LIKE %s LIMIT 1',
                [f"%{secret}%"],
            )
            if cursor.fetchone():
                return True
    return False


def test_requests_without_a_token_or_with_bad_bodies_are_clear_errors(world: World) -> None:
    async def scenario() -> list[httpx.Response]:
        await world.discover()
        return [
            await world.http.post(SIGN_IN, json={"scope": "poppy:read", "credentials": {}}),
            await world.http.get(SIGN_IN),
            await world.http.post(f"{SIGN_IN}/msi_unknown", json={"code": "1"}),
        ]

    no_token, get, code = asyncio.run(scenario())
    assert no_token.status_code == 401 and no_token.json()["error"] == "invalid_token"
    assert get.status_code == 405
    assert code.status_code == 401
