"""A personal agent built from the SDK's public clients, on the network of the example project
as shipped (:mod:`tests.authority.shipped`): Sessions, Device and Direct Sign-In, a browser
of its own joined to a Session, Mediated Sign-In, sign-out."""

from __future__ import annotations

import base64
import json
import secrets
import time
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt
from personal_agent_protocol import DirectSignInClient, DiscoveryClient
from personal_agent_protocol.accounts import AccountTokenClient, AccountTokenContext
from personal_agent_protocol.demo.kit import AgentIdentity, PersonalAgentHost
from personal_agent_protocol.mcp import McpDpopAuth
from personal_agent_protocol.reactor import build_pap_reactor
from reactor import PluginManifest  # type: ignore[import-untyped]

from tests.authority.driver import AcmeUser
from tests.authority.sdk_agent import TENANT, RealClock, SdkAgent, UserBrowser
from tests.authority.shipped import ORIGIN, PASSWORD, ShippedAcme

ATLAS = AgentIdentity(domain="atlas.example", name="Atlas")
PLAIN = AgentIdentity(domain="plain.example", name="Plain", extensions=())
MCP_URL = f"{ORIGIN}/poppy/mcp"


class Agent(SdkAgent):
    """A personal agent (``identity``) built from the SDK's public clients."""

    def __init__(self, acme: ShippedAcme, identity: AgentIdentity = ATLAS) -> None:
        self.acme = acme
        http = acme.client()
        browser = UserBrowser()
        clock = RealClock()
        host = PersonalAgentHost(identity, clock, browser=browser)  # type: ignore[arg-type]
        reactor, _ = build_pap_reactor(
            http_client=http,
            address_resolver=acme.resolve,
            plugins=[(PluginManifest(name=f"{identity.domain}-host", version="1"), host)],
        )
        super().__init__(
            identity,
            reactor,
            http,
            DiscoveryClient(reactor=reactor),
            AcmeUser(acme.client, ORIGIN, PLAIN, password=PASSWORD),
            browser,
            clock,
        )

    async def authorization_url(self, user: str, session: Any, scopes: tuple[str, ...]) -> str:
        """Direct Sign-In begun for ``scopes``: the consent page's URL."""
        direct = DirectSignInClient(reactor=self.reactor, http_client=self.http)
        await direct.begin(
            authorization_endpoint=self.metadata.authorization_endpoint,
            token_endpoint=self.metadata.token_endpoint,
            issuer=self.metadata.issuer,
            client_id=self.identity.client_id,
            redirect_uri=self.identity.metadata["redirect_uris"][0],
            scopes=scopes,
            tenant_id=TENANT,
            pairwise_user_id=user,
            session_id=session.session_id,
        )
        return str(self.browser.urls[-1])

    async def join(self, user: str, session_id: str) -> httpx.AsyncClient:
        """The agent's own browser (a cookie jar of its own) joined to ``session_id``."""
        now = int(time.time())
        claims = {
            "iss": self.identity.client_id,
            "sub": user,
            "aud": f"{ORIGIN}/poppy/browser-session",
            "session_id": session_id,
            "return_to": f"{ORIGIN}/account/session",
            "iat": now,
            "exp": now + 60,
            "jti": base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("="),
        }
        assertion = jwt.encode(
            claims,
            self.identity.private_key,
            algorithm="ES256",
            headers={"typ": "poppy-browser+jwt", "kid": self.identity.kid},
        )
        browser = self.acme.client()
        joined = await browser.post(
            f"{ORIGIN}/poppy/browser-session",
            content=urlencode({"assertion": assertion}).encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert joined.status_code == 303, joined.text
        return browser

    async def signed_in(self, user: str, account: str, scopes: tuple[str, ...]) -> Any:
        """A Session signed in to ``account`` for ``scopes`` (Device Sign-In, approved by the
        account's person on Acme's page); its last poll."""
        session = await self.session(user)
        return await self.device_sign_in(user, session, account, scopes)

    def account_tokens(self, user: str) -> AccountTokenContext:
        return AccountTokenContext(
            token_endpoint=self.metadata.token_endpoint,
            issuer=self.metadata.issuer,
            client_id=self.identity.client_id,
            tenant_id=TENANT,
            pairwise_user_id=user,
            revocation_endpoint=self.metadata.revocation_endpoint,
        )

    async def sign_out(self, user: str, reference: Any) -> None:
        tokens = AccountTokenClient(reactor=self.reactor, http_client=self.http)
        assert (await tokens.revoke(reference, context=self.account_tokens(user))).revoked

    async def mediated(
        self, user: str, token: Any, username: str, password: str, scope: str = "poppy:read"
    ) -> httpx.Response:
        """One Mediated Sign-In attempt, as the wire has it (no client-side budget)."""
        body = {"scope": scope, "credentials": {"username": username, "password": password}}
        return await self.transport.request(
            "POST",
            f"{ORIGIN}/poppy/sign-in",
            token=token,
            headers={"Content-Type": "application/json"},
            content=json.dumps(body).encode(),
            **self.who(user),
        )

    async def mcp_token(self, user: str, polled: Any) -> Any:
        """A Session Token for Acme's MCP server, from a signed-in Session's Account Token."""
        tokens = AccountTokenClient(reactor=self.reactor, http_client=self.http)
        result = await tokens.token_for_mcp(
            polled.account_token_reference,
            context=self.account_tokens(user),
            session_id=polled.token.session_id,
            resource=MCP_URL,
            dpop=True,
        )
        return result.token

    async def mcp(self, user: str, token: Any, body: bytes, **headers: str) -> httpx.Response:
        """One raw POST to Acme's MCP server with a DPoP-bound token and its proof."""
        auth = McpDpopAuth(token, MCP_URL, reactor=self.reactor, who=self.who(user))
        return await self.http.post(
            MCP_URL,
            content=body,
            headers={"Content-Type": "application/json", **headers},
            auth=auth,
        )

    async def dpop(
        self,
        user: str,
        token: Any,
        method: str,
        url: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """One raw request with the Session Token and a DPoP proof (no client budget)."""
        sent = {"Content-Type": "application/json"} if body is not None else {}
        return await self.transport.request(
            method,
            url,
            token=token,
            headers={**sent, **(headers or {})} or None,
            content=body,
            **self.who(user),
        )
