"""A personal agent built from ``personal-agent-protocol``'s public clients, as the authority
and interop tests drive it: discovery, Sessions, conversations and Device Sign-In.

One copy for both networks it runs on: the SDK's in-process network (:class:`World`, the
authority's own tests, through Django's test settings) and real TLS sockets to the example
project as shipped (``Atlas`` in test_sdk_end_to_end.py). Each builds the reactor and HTTP
client of its network and hands them here.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from django.core.asgi import get_asgi_application
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

from tests.agents import COMPANY_DOMAIN, COMPANY_ORIGIN
from tests.authority import network
from tests.authority.driver import AcmeUser

DOMAIN = COMPANY_DOMAIN
ORIGIN = COMPANY_ORIGIN
TENANT = "tests"


class RealClock:
    """The SDK's demo clock is frozen; the company checks assertions against real time.

    A device sign-in's pacing (the SDK polls no sooner than the interval the authority asks
    for) is let pass on this clock rather than slept: :meth:`passing` runs it that far ahead
    for the poll, well within the company's leeway for a proof's or an assertion's ``iat``."""

    def __init__(self) -> None:
        self.ahead = 0.0
        self._lent = 0.0

    def now(self) -> datetime:
        lent, self._lent = self._lent, 0.0
        return datetime.now(UTC) + timedelta(seconds=self.ahead + lent)

    def lend(self, seconds: float) -> None:
        """Be ``seconds`` ahead for the next reading only: what :meth:`passing` does for a
        caller that cannot wrap the poll, the conformance suite, which waits out a device
        sign-in's interval through its driver and then polls (the poll reads the clock first,
        to pace itself). A lend replaces the one before: never more than one interval ahead."""
        self._lent = seconds

    @contextlib.contextmanager
    def passing(self, seconds: float) -> Iterator[None]:
        self.ahead += seconds
        try:
            yield
        finally:
            self.ahead -= seconds


class UserBrowser:
    """The User's browser as the agent hands a Direct Sign-In link to it: kept for the test."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    async def open(self, authorization_url: Any) -> None:
        self.urls.append(authorization_url.get_secret_value())


class SdkAgent:
    """The SDK's clients for one personal agent (``identity``) on one network; ``browser``:
    the User's (a :class:`UserBrowser`) or a controlled one the agent drives."""

    def __init__(
        self,
        identity: AgentIdentity,
        reactor: Any,
        http: Any,
        discovery: DiscoveryClient,
        user: AcmeUser,
        browser: Any,
        clock: RealClock,
    ) -> None:
        self.identity = identity
        self.clock = clock
        self.reactor = reactor
        self.http = http
        self.discovery = discovery
        self.user = user
        self.browser = browser
        self.sessions = SessionClient(reactor=reactor, http_client=http)
        self.transport = DpopHttpClient(reactor=reactor, http_client=http)
        self.conversations = ConversationClient(transport=self.transport)

    async def discover(self) -> Any:
        self.company = await self.discovery.discover(DOMAIN)
        self.metadata = self.company.oauth_metadata
        return self.company

    def who(self, user: str) -> dict[str, str]:
        return {"tenant_id": TENANT, "pairwise_user_id": user, "issuer": self.metadata.issuer}

    async def session(self, user: str, session_id: str | None = None) -> Any:
        """A new Session for ``user``, or (``session_id``) that Session renewed."""
        arguments = {
            "client_id": self.identity.client_id,
            "pairwise_user_id": user,
            "issuer": self.metadata.issuer,
            "token_endpoint": self.metadata.token_endpoint,
            "tenant_id": TENANT,
        }
        if session_id is None:
            return await self.sessions.start(**arguments)
        return await self.sessions.renew(**arguments, session_id=session_id)

    @property
    def endpoint(self) -> str:
        return str(self.company.document.agent.protocols[0].endpoint)

    async def talk(self, user: str, token: Any, text: str) -> list[Any]:
        """Start a conversation and read (waiting) until the Company Agent's turn is done."""
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

    async def begin_device_sign_in(
        self, user: str, session: Any, scopes: tuple[str, ...]
    ) -> tuple[DeviceSignInClient, Any]:
        """Device Sign-In begun for ``session``: its client and its start (the user code)."""
        device = DeviceSignInClient(reactor=self.reactor, http_client=self.http)
        started = await device.begin(
            device_authorization_endpoint=self.metadata.device_authorization_endpoint,
            token_endpoint=self.metadata.token_endpoint,
            issuer=self.metadata.issuer,
            client_id=self.identity.client_id,
            scopes=scopes,
            tenant_id=TENANT,
            pairwise_user_id=user,
            session_id=session.session_id,
            organization=self.company.document.organization,
            poppy_domains=self.metadata.poppy_domains,
        )
        return device, started

    async def device_sign_in(
        self,
        user: str,
        session: Any,
        account: str,
        scopes: tuple[str, ...] = ("poppy:read", "poppy:write"),
    ) -> Any:
        """Device Sign-In for ``session``, approved by ``account`` on the company's page."""
        device, started = await self.begin_device_sign_in(user, session, scopes)
        await self.user.approve_device(started.user_code, account=account, scopes=list(scopes))
        # Approved (and committed) before the first poll, which the authority answers at once;
        # the interval it asks for passes on the agent's clock (the protocol's pace, kept).
        with self.clock.passing(started.poll_interval):
            polled = await device.poll(started.reference)
        assert polled.status == "complete", f"the approved sign-in is {polled.status}"
        return polled


class World(SdkAgent):
    """Atlas, a personal agent built from the SDK, and Acme, the example project under the
    test settings, on the SDK's in-process network (sites from :mod:`tests.authority.network`)."""

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
        http = self.network.client()
        browser = UserBrowser()
        clock = RealClock()
        self.host = PersonalAgentHost(
            self.atlas,
            clock,  # type: ignore[arg-type]
            browser=browser,  # type: ignore[arg-type]
        )
        reactor = personal_agent_reactor(self.host, network=self.network, http_client=http)
        super().__init__(
            self.atlas,
            reactor,
            http,
            DiscoveryClient(reactor=reactor, http_client=http),
            AcmeUser(self.network.client, ORIGIN, self.plain),
            browser,
            clock,
        )

    def record_responses(self) -> list[str]:
        """Every response Atlas gets from now on, headers and body, as text (a list that
        fills as they come): where a test looks for what must never be answered."""
        seen: list[str] = []

        async def keep(response: httpx.Response) -> None:
            await response.aread()
            seen.append(json.dumps(dict(response.headers)) + response.text)

        self.http.event_hooks["response"].append(keep)
        return seen
