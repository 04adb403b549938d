"""A personal agent with every channel client of the SDK: browser, Mediated Sign-In, feedback.

Built from the SDK's own parts (``PersonalAgentHost`` with a protected input and a controlled
browser of its own, ``personal_agent_reactor``) on the world's network, so everything it
sends reaches Acme over TLS while :func:`personal_agent_protocol.demo.sockets.served_over_tls`
runs.
"""

from __future__ import annotations

import base64
import secrets
import time
from typing import Any

import jwt
from personal_agent_protocol.accounts import AccountTokenClient, AccountTokenContext
from personal_agent_protocol.browser import BrowserSessionClient
from personal_agent_protocol.demo.kit import (
    ControlledBrowser,
    PersonalAgentHost,
    ScriptedInput,
    personal_agent_reactor,
)
from personal_agent_protocol.feedback import FeedbackClient, FeedbackReport
from personal_agent_protocol.mediated import MediatedSignInClient, MediatedSignInResult

from tests.authority.sdk_agent import DOMAIN, ORIGIN, TENANT, RealClock, SdkAgent, World

BROWSER_ENDPOINT = f"{ORIGIN}/poppy/browser-session"


class ChannelAgent(SdkAgent):
    """Atlas with a trusted input surface (the User types credentials there) and a browser;
    the world's company (discovered there), this agent's own DPoP keys."""

    def __init__(self, world: World, form_post: Any = None) -> None:
        """``form_post``: the host's ``pap.browserFormPost`` (default: the SDK's
        ``ControlledBrowser``, an httpx client with its own cookie jar)."""
        self.world = world
        self.input = ScriptedInput()
        controlled = ControlledBrowser(world.network.client())
        clock = RealClock()
        self.host = PersonalAgentHost(
            world.atlas,
            clock,  # type: ignore[arg-type]
            protected_input=self.input,
            controlled_browser=form_post or controlled,
        )
        reactor = personal_agent_reactor(self.host, network=world.network, http_client=world.http)
        # Its browser is the controlled one it joins sessions in (``browser.page``).
        super().__init__(
            world.atlas, reactor, world.http, world.discovery, world.user, controlled, clock
        )
        self.mediated = MediatedSignInClient(reactor=self.reactor, http_client=world.http)
        self.feedback = FeedbackClient(transport=self.transport)
        self.accounts = AccountTokenClient(reactor=self.reactor, http_client=world.http)

    @property  # type: ignore[override]
    def company(self) -> Any:
        return self.world.company

    @property  # type: ignore[override]
    def metadata(self) -> Any:
        return self.world.metadata

    async def sign_in(
        self, user: str, token: Any, credentials: dict[str, str], scopes: tuple[str, ...]
    ) -> MediatedSignInResult:
        """Mediated Sign-In with what the User typed into the host's protected input."""
        self.input.answers.append(credentials)
        company = self.world.company
        return await self.mediated.sign_in(
            mediated=company.document.auth.mediated,
            organization=company.document.organization,
            issuer=company.oauth_metadata.issuer,
            scopes=scopes,
            token=token,
            tenant_id=TENANT,
            pairwise_user_id=user,
        )

    async def submit_code(self, user: str, token: Any, reference: str, code: str) -> Any:
        self.input.answers.append({"code": code})
        return await self.mediated.submit_code(
            reference,
            token=token,
            tenant_id=TENANT,
            pairwise_user_id=user,
            issuer=self.world.company.oauth_metadata.issuer,
        )

    async def join(self, user: str, session_id: str, return_to: str) -> Any:
        """The SDK's browser-session handoff: sign an assertion, form-post it, land."""
        await BrowserSessionClient(reactor=self.reactor).join(
            client_id=self.world.atlas.client_id,
            pairwise_user_id=user,
            browser_session_endpoint=self.world.company.document.web.browser_session_endpoint,
            session_id=session_id,
            return_to=return_to,
            company_domain=DOMAIN,
        )
        return self.browser.page

    async def report(self, user: str, token: Any, task: str, description: str) -> None:
        await self.feedback.report(
            self.world.company.document.feedback.endpoint,
            FeedbackReport(task=task, description=description),
            token=token,
            tenant_id=TENANT,
            pairwise_user_id=user,
            issuer=self.world.company.oauth_metadata.issuer,
        )

    async def sign_out(self, user: str, reference: str) -> None:
        metadata = self.world.company.oauth_metadata
        await self.accounts.revoke(
            reference,
            context=AccountTokenContext(
                token_endpoint=metadata.token_endpoint,
                revocation_endpoint=metadata.revocation_endpoint,
                issuer=metadata.issuer,
                client_id=self.world.atlas.client_id,
                tenant_id=TENANT,
                pairwise_user_id=user,
            ),
        )


def browser_claims(world: World, user: str, session_id: str, **changes: Any) -> dict[str, Any]:
    """A valid browser assertion's claims for Atlas, changed by ``changes``."""
    now = int(time.time())
    claims = {
        "iss": world.atlas.client_id,
        "sub": user,
        "aud": BROWSER_ENDPOINT,
        "session_id": session_id,
        "return_to": f"{ORIGIN}/account/session",
        "iat": now,
        "exp": now + 60,
        "jti": base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("="),
    }
    claims.update(changes)
    return claims


def sign(world: World, claims: dict[str, Any], *, key: Any = None, **header: Any) -> str:
    """Claims signed with Atlas's key (or ``key``), as a browser assertion unless told."""
    headers = {"typ": "poppy-browser+jwt", "kid": world.atlas.kid, **header}
    return jwt.encode(claims, key or world.atlas.private_key, algorithm="ES256", headers=headers)
