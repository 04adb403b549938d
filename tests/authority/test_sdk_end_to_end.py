"""An unmodified SDK personal agent finds Acme by its domain and talks to its Company Agent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from personal_agent_protocol import (
    DeviceSignInClient,
    DirectSignInClient,
    Message,
    generate_message_id,
)
from personal_agent_protocol.accounts import AccountTokenClient, AccountTokenContext
from personal_agent_protocol.errors import ConversationError, SessionError

from poppy_django.authority.models import Client, Session
from tests.authority.conftest import DOMAIN, ORIGIN, TENANT, World

pytestmark = pytest.mark.django_db(transaction=True)


def test_discovery_from_the_domain_alone(world: World) -> None:
    company = asyncio.run(world.discover())
    document = company.document
    assert document.protocol_version == "0.2"
    assert document.organization.domain == DOMAIN
    assert document.auth.issuer == ORIGIN
    assert world.endpoint == f"{ORIGIN}/poppy/conversations"
    metadata = company.oauth_metadata
    assert metadata.issuer == ORIGIN
    assert metadata.poppy_domains == [DOMAIN]
    assert metadata.token_endpoint == f"{ORIGIN}/oauth/token"
    assert metadata.revocation_endpoint == f"{ORIGIN}/oauth/revoke"
    assert "ES256" in metadata.dpop_signing_alg_values_supported


def test_a_session_then_a_conversation_answered_by_the_company_agent(world: World) -> None:
    async def scenario() -> tuple[Any, list[Any]]:
        await world.discover()
        user = "usr_atlas_user_0000000001"
        session = await world.session(user)
        return session, await world.talk(user, session, "hello acme")

    session, events = asyncio.run(scenario())
    assert session.token_type == "DPoP"
    assert session.signed_in is False
    assert session.scope == ""
    assert 0 < session.expires_in <= 300
    replies = [
        e.message.text for e in events if e.type == "message" and e.message.role == "company"
    ]
    assert replies == ["You said: hello acme"]
    stored = Session.objects.get(session_id=session.session_id)
    assert stored.user_id == "usr_atlas_user_0000000001"
    assert stored.client.client_id == world.atlas.client_id
    assert stored.account_id is None


def test_renewal_keeps_the_session_and_another_users_renewal_is_invalid_session(
    world: World,
) -> None:
    async def scenario() -> tuple[Any, Any, SessionError]:
        await world.discover()
        first = await world.session("usr_owner_00000000000001")
        renewed = await world.renew("usr_owner_00000000000001", first.session_id)
        with pytest.raises(SessionError) as refused:
            await world.renew("usr_stranger_000000000001", first.session_id)
        return first, renewed, refused.value

    first, renewed, refused = asyncio.run(scenario())
    assert renewed.session_id == first.session_id
    assert renewed.access_token.get_secret_value() != first.access_token.get_secret_value()
    assert refused.code == "invalid_session"
    assert Session.objects.count() == 1


def test_parallel_sessions_of_one_user_are_distinct(world: World) -> None:
    async def scenario() -> list[Any]:
        await world.discover()
        user = "usr_parallel_000000000001"
        return list(await asyncio.gather(world.session(user), world.session(user)))

    first, second = asyncio.run(scenario())
    assert first.session_id != second.session_id
    assert Client.objects.get().client_id == world.atlas.client_id


def test_device_sign_in_on_the_companys_page_then_signed_in_reads(
    world: World, customers: None
) -> None:
    async def scenario() -> tuple[Any, Any, int]:
        await world.discover()
        user = "usr_device_user_00000001"
        session = await world.session(user)
        metadata = world.company.oauth_metadata
        device = DeviceSignInClient(reactor=world.reactor, http_client=world.http)
        started = await device.begin(
            device_authorization_endpoint=metadata.device_authorization_endpoint,
            token_endpoint=metadata.token_endpoint,
            issuer=metadata.issuer,
            client_id=world.atlas.client_id,
            scopes=("poppy:read", "poppy:write"),
            tenant_id=TENANT,
            pairwise_user_id=user,
            session_id=session.session_id,
            organization=world.company.document.organization,
            poppy_domains=metadata.poppy_domains,
        )
        await world.user.approve_device(started.user_code, account="acct-1", scopes=["poppy:read"])
        await asyncio.sleep(started.poll_interval)
        polled = await device.poll(started.reference)
        return session, polled, await world.talk(user, polled.token, "my orders please")

    session, polled, answer = asyncio.run(scenario())
    assert polled.status == "complete"
    assert polled.token.signed_in is True
    assert polled.token.session_id == session.session_id
    assert polled.token.scopes == ("poppy:read",)
    stored = Session.objects.get(session_id=session.session_id)
    assert stored.account_id == "acct-1" and stored.scope == "poppy:read"
    # The Company Agent reads acct-1's orders for the signed-in Session.
    replies = [
        e.message.text for e in answer if e.type == "message" and e.message.role == "company"
    ]
    assert replies and "A-1" in replies[-1] and "B-1" not in replies[-1]


def test_direct_sign_in_with_pkce_in_the_users_browser(world: World, customers: None) -> None:
    async def scenario() -> tuple[Any, Any, list[Any]]:
        await world.discover()
        user = "usr_direct_user_00000001"
        session = await world.session(user)
        metadata = world.company.oauth_metadata
        direct = DirectSignInClient(reactor=world.reactor, http_client=world.http)
        await direct.begin(
            authorization_endpoint=metadata.authorization_endpoint,
            token_endpoint=metadata.token_endpoint,
            issuer=metadata.issuer,
            client_id=world.atlas.client_id,
            redirect_uri=world.atlas.metadata["redirect_uris"][0],
            scopes=("poppy:read", "poppy:write"),
            tenant_id=TENANT,
            pairwise_user_id=user,
            session_id=session.session_id,
        )
        callback = await world.user.approve_authorization(world.browser.urls[-1], account="acct-2")
        done = await direct.complete(callback)
        return session, done, await world.talk(user, done.token, "my orders please")

    session, done, events = asyncio.run(scenario())
    assert done.token.signed_in and done.token.session_id == session.session_id
    assert set(done.token.scopes) == {"poppy:read", "poppy:write"}
    assert done.account_token_reference is not None
    replies = [
        e.message.text for e in events if e.type == "message" and e.message.role == "company"
    ]
    assert replies and "B-1" in replies[-1] and "A-1" not in replies[-1]
    assert Session.objects.get(session_id=session.session_id).grant.method == "direct"


async def _device_sign_in(world: World, user: str, session: Any, account: str) -> Any:
    metadata = world.company.oauth_metadata
    device = DeviceSignInClient(reactor=world.reactor, http_client=world.http)
    started = await device.begin(
        device_authorization_endpoint=metadata.device_authorization_endpoint,
        token_endpoint=metadata.token_endpoint,
        issuer=metadata.issuer,
        client_id=world.atlas.client_id,
        scopes=("poppy:read", "poppy:write"),
        tenant_id=TENANT,
        pairwise_user_id=user,
        session_id=session.session_id,
        organization=world.company.document.organization,
        poppy_domains=metadata.poppy_domains,
    )
    await world.user.approve_device(started.user_code, account=account)
    await asyncio.sleep(started.poll_interval)
    return await device.poll(started.reference)


def test_sign_out_stops_every_session_from_the_account_token_at_the_next_request(
    world: World, customers: None, acme_settings: Any
) -> None:
    acme_settings.POPPY = {
        **acme_settings.POPPY,
        "SESSION_STATUS": "poppy_django.authority.status.session_is_active",
        "SESSION_STATUS_CACHE_SECONDS": 0,
    }
    user = "usr_sign_out_000000000001"

    async def scenario() -> tuple[Any, str, Any]:
        await world.discover()
        session = await world.session(user)
        polled = await _device_sign_in(world, user, session, "acct-1")
        message = Message(id=generate_message_id(world.reactor), sender="agent", text="hello")
        started = await world.conversations.start(  # served signed in: the account's
            world.endpoint, message, token=polled.token, wait=10, **world.who(user)
        )
        context = AccountTokenContext(
            token_endpoint=world.company.oauth_metadata.token_endpoint,
            issuer=world.company.oauth_metadata.issuer,
            client_id=world.atlas.client_id,
            tenant_id=TENANT,
            pairwise_user_id=user,
            revocation_endpoint=world.company.oauth_metadata.revocation_endpoint,
        )
        revoked = await AccountTokenClient(reactor=world.reactor, http_client=world.http).revoke(
            polled.account_token_reference, context=context
        )
        with pytest.raises(ConversationError) as refused:  # the token is signed out now
            await world.conversations.read_events(
                world.endpoint, started.conversation_id, token=polled.token, **world.who(user)
            )
        renewed = await world.renew(user, session.session_id)
        return revoked, refused.value.code, renewed

    revoked, refused, renewed = asyncio.run(scenario())
    assert revoked.revoked
    assert refused == "sign_in_required"
    assert renewed.signed_in is False  # the Session continues, signed out


def test_the_sdk_retries_with_the_token_endpoints_nonce(world: World, acme_settings: Any) -> None:
    acme_settings.POPPY = {
        **acme_settings.POPPY,
        "TOKENS": {**acme_settings.POPPY["TOKENS"], "REQUIRE_NONCE": True},
    }

    async def scenario() -> Any:
        await world.discover()
        return await world.session("usr_nonce_0000000000001")

    assert asyncio.run(scenario()).session_id.startswith("ses_")
