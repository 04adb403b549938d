"""The authority's own tests: the example project as its issuer at ``acme.example``, through
Django's test client, with personal agents' sites from :mod:`tests.authority.network`.

``world`` gives an unmodified ``personal-agent-protocol`` personal agent (Atlas) reaching the
company by its domain over the SDK's in-process network (the channel and fuzz tests). The
interop tests (``test_conformance``, ``test_sdk_end_to_end``) do not use these settings: they
run the example project as shipped (:mod:`tests.authority.shipped`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.asgi import get_asgi_application
from django.core.cache import caches
from personal_agent_protocol import (
    ConversationClient,
    DeviceSignInClient,
    DiscoveryClient,
    DpopHttpClient,
    Message,
    SessionClient,
    generate_message_id,
)
from personal_agent_protocol.demo.kit import (
    AgentIdentity,
    InProcessNetwork,
    PersonalAgentHost,
    personal_agent_reactor,
)

from poppy_django.authority.keys import jwks_of_file
from poppy_django.store import process_cache
from poppy_django.verifier import dpop
from tests.authority import network
from tests.authority.driver import PASSWORD, AcmeUser

DOMAIN = "acme.example"
ORIGIN = f"https://{DOMAIN}"
TENANT = "tests"


class RealClock:
    """The SDK's demo clock is frozen; the company checks assertions against real time."""

    def now(self) -> datetime:
        return datetime.now(UTC)


@pytest.fixture
def acme_settings(settings: Any, tmp_path: Path) -> Any:
    """The example project as its own issuer at https://acme.example, configured as in
    production: its own signing key, and the endpoint verifying with the public half."""
    key_file = tmp_path / "signing-key.pem"
    key_file.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    settings.ALLOWED_HOSTS = [DOMAIN, "testserver"]
    settings.POPPY = {
        **settings.POPPY,
        "BASE_URL": ORIGIN,
        "ISSUER": ORIGIN,
        "AUTHENTICATE": "poppy_django.verifier.dpop.verify",
        "TOKENS": {"JWKS": jwks_of_file(key_file)},
        "DEV_AUTHORITY": False,
        "DISCOVERY": {"ORGANIZATION": {"name": "Acme Outfitters", "domain": DOMAIN}},
    }
    # Served at https://acme.example: what POPPY_BASE_URL=https://... makes the example set.
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    settings.POPPY_AUTHORITY = {
        **settings.POPPY_AUTHORITY,  # the example's channels, as shipped
        "SIGNING_KEY_FILE": str(key_file),
        "FETCH_TRANSPORT": "tests.authority.network.transport",
        "RESOLVER": "tests.authority.network.resolve",
        "DEVICE_INTERVAL_SECONDS": 1,
    }
    dpop.reset()
    return settings


@pytest.fixture
def customers(django_user_model: Any) -> None:
    """The Users of acct-1 and acct-2, who log in on Acme's own page."""
    for account in ("acct-1", "acct-2"):
        user, _ = django_user_model.objects.get_or_create(username=account)
        user.set_password(PASSWORD)
        user.save()


@pytest.fixture(autouse=True)
def _sites() -> Iterator[None]:
    """No site, and nothing the authority remembers in its cache (failed clients, fetch and
    guess counts), carried from one test to the next."""
    network.reset()
    caches["default"].clear()
    yield
    network.reset()
    process_cache.forget()


class UserBrowser:
    """The User's browser as the agent hands a Direct Sign-In link to it: kept for the test."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    async def open(self, authorization_url: Any) -> None:
        self.urls.append(authorization_url.get_secret_value())


class World:
    """Atlas, a personal agent built from the SDK, and Acme, the example project."""

    def __init__(self) -> None:
        self.network = InProcessNetwork()
        self.network.add(DOMAIN, get_asgi_application())
        self.atlas = AgentIdentity(domain="atlas.example", name="Atlas")
        self.network.add(self.atlas.domain, self.atlas.website())
        network.serve_identity(self.atlas)
        # A second personal agent, listing no extension.
        self.plain = AgentIdentity(domain="plain.example", name="Plain", extensions=())
        self.network.add(self.plain.domain, self.plain.website())
        network.serve_identity(self.plain)
        self.user = AcmeUser(self.network.client, ORIGIN, self.plain)
        self.http = self.network.client()
        self.browser = UserBrowser()
        self.host = PersonalAgentHost(
            self.atlas,
            RealClock(),  # type: ignore[arg-type]
            browser=self.browser,  # type: ignore[arg-type]
        )
        self.reactor = personal_agent_reactor(
            self.host, network=self.network, http_client=self.http
        )
        self.discovery = DiscoveryClient(reactor=self.reactor, http_client=self.http)
        self.sessions = SessionClient(reactor=self.reactor, http_client=self.http)
        self.transport = DpopHttpClient(reactor=self.reactor, http_client=self.http)
        self.conversations = ConversationClient(transport=self.transport)

    async def discover(self) -> Any:
        self.company = await self.discovery.discover(DOMAIN)
        return self.company

    def who(self, user: str) -> dict[str, str]:
        return {
            "tenant_id": TENANT,
            "pairwise_user_id": user,
            "issuer": self.company.oauth_metadata.issuer,
        }

    async def session(self, user: str) -> Any:
        metadata = self.company.oauth_metadata
        return await self.sessions.start(
            client_id=self.atlas.client_id,
            pairwise_user_id=user,
            issuer=metadata.issuer,
            token_endpoint=metadata.token_endpoint,
            tenant_id=TENANT,
        )

    async def renew(self, user: str, session_id: str) -> Any:
        metadata = self.company.oauth_metadata
        return await self.sessions.renew(
            client_id=self.atlas.client_id,
            pairwise_user_id=user,
            issuer=metadata.issuer,
            token_endpoint=metadata.token_endpoint,
            tenant_id=TENANT,
            session_id=session_id,
        )

    async def talk(self, user: str, token: Any, text: str) -> list[Any]:
        """Start a conversation and read until the Company Agent's turn is done."""
        message = Message(id=generate_message_id(self.reactor), sender="agent", text=text)
        started = await self.conversations.start(
            self.endpoint, message, token=token, wait=10, **self.who(user)
        )
        events, cursor = list(started.events), started.cursor
        while not (events[-1].type == "state" and events[-1].status != "working"):
            page = await self.conversations.read_events(
                self.endpoint,
                started.conversation_id,
                token=token,
                cursor=cursor,
                wait=10,
                **self.who(user),
            )
            events += page.events
            cursor = page.cursor
        return events

    @property
    def endpoint(self) -> str:
        return str(self.company.document.agent.protocols[0].endpoint)


@pytest.fixture
def world(acme_settings: Any) -> World:
    return World()


async def device_sign_in(world: World, user: str, session: Any, account: str) -> Any:
    """Device Sign-In for ``session``, approved by ``account`` on the company's page."""
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
