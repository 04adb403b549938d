"""An unmodified SDK personal agent finds Acme by its domain and talks to it, as shipped.

Acme runs as :mod:`tests.authority.shipped` starts it (its own settings and URLs, production
mode, uvicorn over TLS, a Celery worker, PostgreSQL, Redis); the personal agent is built
from ``personal-agent-protocol``'s public clients, and the customer consents on Acme's own
pages. No setting is overridden.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from personal_agent_protocol import (
    DirectSignInClient,
    DiscoveryClient,
    Message,
    generate_message_id,
)
from personal_agent_protocol.accounts import AccountTokenClient, AccountTokenContext
from personal_agent_protocol.demo.kit import AgentIdentity, PersonalAgentHost
from personal_agent_protocol.errors import ConversationError, SessionError
from personal_agent_protocol.reactor import build_pap_reactor
from reactor import PluginManifest  # type: ignore[import-untyped]

from tests.authority.driver import AcmeUser
from tests.authority.sdk_agent import TENANT, RealClock, SdkAgent, UserBrowser
from tests.authority.shipped import DOMAIN, ORIGIN, PASSWORD, ShippedAcme, shipped_acme

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]
ATLAS = AgentIdentity(domain="atlas.example", name="Atlas")
PLAIN = AgentIdentity(domain="plain.example", name="Plain", extensions=())


@pytest.fixture(scope="module")
def acme(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShippedAcme]:
    with shipped_acme(Path(tmp_path_factory.mktemp("acme")), [ATLAS, PLAIN]) as running:
        yield running
        problems = running.log_problems()
    assert not problems, "\n".join(problems[:40])


class Atlas(SdkAgent):
    """A personal agent built from the SDK's public clients, on the test network."""

    def __init__(self, acme: ShippedAcme, *, acme_port: int | None = None) -> None:
        self.acme = acme
        http = acme.client(acme_port=acme_port)
        browser = UserBrowser()
        clock = RealClock()
        host = PersonalAgentHost(ATLAS, clock, browser=browser)  # type: ignore[arg-type]
        reactor, _ = build_pap_reactor(
            http_client=http,
            address_resolver=acme.resolve,
            plugins=[(PluginManifest(name="atlas-host", version="1"), host)],
        )
        super().__init__(
            ATLAS,
            reactor,
            http,
            DiscoveryClient(reactor=reactor),
            AcmeUser(acme.client, ORIGIN, PLAIN, password=PASSWORD),
            browser,
            clock,
        )


def company_texts(events: list[Any]) -> list[str]:
    return [e.message.text for e in events if e.type == "message" and e.message.role == "company"]


def test_discovery_from_the_domain_alone(acme: ShippedAcme) -> None:
    async def scenario() -> Any:
        return await Atlas(acme).discover()

    company = asyncio.run(scenario())
    document = company.document
    assert document.protocol_version == "0.2"
    assert document.organization.domain == DOMAIN
    assert document.auth.issuer == ORIGIN
    assert "orders:read" in document.auth.device.scopes
    assert str(document.agent.protocols[0].endpoint) == f"{ORIGIN}/poppy/conversations"
    # Its orders API and the MCP server of the Company Agent's tools, each described.
    openapi, mcp = document.apis
    assert (openapi.type, str(openapi.url)) == ("openapi", f"{ORIGIN}/api/schema")
    assert (mcp.type, str(mcp.url)) == ("mcp", f"{ORIGIN}/poppy/mcp")
    assert openapi.description and mcp.description
    metadata = company.oauth_metadata
    assert metadata.issuer == ORIGIN
    assert metadata.poppy_domains == [DOMAIN]
    assert metadata.token_endpoint == f"{ORIGIN}/oauth/token"
    assert metadata.revocation_endpoint == f"{ORIGIN}/oauth/revoke"
    assert "ES256" in metadata.dpop_signing_alg_values_supported


def test_a_session_then_a_conversation_answered_by_the_company_agent(acme: ShippedAcme) -> None:
    async def scenario() -> tuple[Any, list[Any]]:
        atlas = Atlas(acme)
        await atlas.discover()
        session = await atlas.session("usr_atlas_user_0000000001")
        return session, await atlas.talk("usr_atlas_user_0000000001", session, "hello acme")

    session, events = asyncio.run(scenario())
    assert session.token_type == "DPoP"
    assert session.signed_in is False and session.scope == ""
    assert 0 < session.expires_in <= 300
    assert company_texts(events) == ["You said: hello acme"]


def test_renewal_keeps_the_session_and_another_users_renewal_is_invalid_session(
    acme: ShippedAcme,
) -> None:
    async def scenario() -> tuple[Any, Any, SessionError, Any]:
        atlas = Atlas(acme)
        await atlas.discover()
        first = await atlas.session("usr_owner_00000000000001")
        renewed = await atlas.session("usr_owner_00000000000001", first.session_id)
        with pytest.raises(SessionError) as refused:
            await atlas.session("usr_stranger_000000000001", first.session_id)
        other = await atlas.session("usr_owner_00000000000001")
        return first, renewed, refused.value, other

    first, renewed, refused, other = asyncio.run(scenario())
    assert renewed.session_id == first.session_id
    assert renewed.access_token.get_secret_value() != first.access_token.get_secret_value()
    assert refused.code == "invalid_session"
    assert other.session_id != first.session_id  # parallel sessions of one User are distinct


def test_device_sign_in_on_the_companys_page_then_the_accounts_orders(acme: ShippedAcme) -> None:
    async def scenario() -> tuple[Any, Any, list[Any], Any, Any]:
        atlas = Atlas(acme)
        await atlas.discover()
        user = "usr_device_user_00000001"
        session = await atlas.session(user)
        polled = await atlas.device_sign_in(user, session, "acct-1", ("poppy:read", "orders:read"))
        events = await atlas.talk(user, polled.token, "my orders please")
        orders = f"{ORIGIN}/api/orders"
        signed_in = await atlas.transport.request(
            "GET", orders, token=polled.token, **atlas.who(user)
        )
        signed_out = await atlas.transport.request("GET", orders, token=session, **atlas.who(user))
        return session, polled, events, signed_in, signed_out

    session, polled, events, signed_in, signed_out = asyncio.run(scenario())
    assert polled.token.signed_in is True
    assert polled.token.session_id == session.session_id
    assert set(polled.token.scopes) == {"poppy:read", "orders:read"}
    replies = company_texts(events)
    assert replies and "A-1" in replies[-1] and "B-1" not in replies[-1]
    # Acme's own API (listed in poppy.json) with the orders:read scope its authority offers.
    assert signed_in.status_code == 200
    assert {order["id"] for order in signed_in.json()} == {"A-1", "A-2"}
    assert signed_out.status_code == 403


def test_direct_sign_in_with_pkce_in_the_users_browser(acme: ShippedAcme) -> None:
    async def scenario() -> tuple[Any, Any, list[Any]]:
        atlas = Atlas(acme)
        await atlas.discover()
        user = "usr_direct_user_00000001"
        session = await atlas.session(user)
        direct = DirectSignInClient(reactor=atlas.reactor, http_client=atlas.http)
        await direct.begin(
            authorization_endpoint=atlas.metadata.authorization_endpoint,
            token_endpoint=atlas.metadata.token_endpoint,
            issuer=atlas.metadata.issuer,
            client_id=ATLAS.client_id,
            redirect_uri=ATLAS.metadata["redirect_uris"][0],
            scopes=("poppy:read", "poppy:write"),
            tenant_id=TENANT,
            pairwise_user_id=user,
            session_id=session.session_id,
        )
        # The customer approves on /oauth/authorize, logged in on Acme's page.
        callback = await atlas.user.approve_authorization(atlas.browser.urls[-1], account="acct-2")
        done = await direct.complete(callback)
        return session, done, await atlas.talk(user, done.token, "my orders please")

    session, done, events = asyncio.run(scenario())
    assert done.token.signed_in and done.token.session_id == session.session_id
    assert set(done.token.scopes) == {"poppy:read", "poppy:write"}
    assert done.account_token_reference is not None
    replies = company_texts(events)
    assert replies and "B-1" in replies[-1] and "A-1" not in replies[-1]


def test_sign_out_on_one_process_takes_effect_at_the_next_request_on_another(
    acme: ShippedAcme,
) -> None:
    """As shipped (the 5 s session-status cache on): the sign-out answered by one web
    process, the very next read served by another that had the signed-in answer memoized."""
    other_port = acme.another_web("web2")
    user = "usr_sign_out_000000000001"

    async def scenario() -> tuple[Any, str, Any]:
        atlas = Atlas(acme)
        revoker = Atlas(acme, acme_port=other_port)
        await atlas.discover()
        await revoker.discover()
        session = await atlas.session(user)
        polled = await atlas.device_sign_in(user, session, "acct-1", ("poppy:read",))
        message = Message(id=generate_message_id(atlas.reactor), sender="agent", text="hello")
        started = await atlas.conversations.start(  # served signed in: memoized here
            atlas.endpoint, message, token=polled.token, wait=10, **atlas.who(user)
        )
        await atlas.conversations.read_events(
            atlas.endpoint, started.conversation_id, token=polled.token, **atlas.who(user)
        )
        context = AccountTokenContext(
            token_endpoint=revoker.metadata.token_endpoint,
            issuer=revoker.metadata.issuer,
            client_id=ATLAS.client_id,
            tenant_id=TENANT,
            pairwise_user_id=user,
            revocation_endpoint=revoker.metadata.revocation_endpoint,
        )
        # The Account Token (kept in Atlas's vault) revoked through the other web process.
        revoked = await AccountTokenClient(reactor=atlas.reactor, http_client=revoker.http).revoke(
            polled.account_token_reference, context=context
        )
        with pytest.raises(ConversationError) as refused:
            await atlas.conversations.read_events(
                atlas.endpoint, started.conversation_id, token=polled.token, **atlas.who(user)
            )
        renewed = await atlas.session(user, session.session_id)
        return revoked, refused.value.code, renewed

    revoked, refused, renewed = asyncio.run(scenario())
    assert revoked.revoked
    assert refused == "sign_in_required"
    assert renewed.signed_in is False  # the Session continues, signed out


def test_the_sdk_retries_with_the_token_endpoints_nonce(acme: ShippedAcme) -> None:
    """A web process that requires DPoP nonces (``POPPY_REQUIRE_NONCE=1``): the SDK is told
    ``use_dpop_nonce`` with a ``DPoP-Nonce`` and retries with it, at the token endpoint and
    the conversation endpoint."""
    port = acme.another_web("web-nonce", {"POPPY_REQUIRE_NONCE": "1"})

    async def scenario() -> tuple[Any, list[Any]]:
        atlas = Atlas(acme, acme_port=port)
        await atlas.discover()
        session = await atlas.session("usr_nonce_0000000000001")
        return session, await atlas.talk("usr_nonce_0000000000001", session, "nonce please")

    session, events = asyncio.run(scenario())
    assert session.session_id.startswith("ses_")
    assert company_texts(events) == ["You said: nonce please"]
    log = (acme.tmp / "web-nonce.log").read_text()
    # Told to use a nonce (400 at the token endpoint, 401 at the resource), then retried.
    assert '"POST /oauth/token HTTP/1.1" 400' in log
    assert '"POST /poppy/conversations?wait=10 HTTP/1.1" 401' in log
