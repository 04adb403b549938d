"""A customer of Acme at the browser: logs in and approves or disconnects on Acme's pages.

The conformance suite's ``UserDriver``: everything a personal agent cannot do itself goes
through the example project's own HTML pages, with Django's login and CSRF (the token read
from each page), as a person's browser would. ``forget_events``, ``revise`` and ``performed``
are the company's operator (hooks the test gives: the product's own pruning, revising and
operation records).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from urllib.parse import urlencode

import httpx
from personal_agent_protocol.demo.kit import AgentIdentity

PASSWORD = "correct horse battery staple"
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


class Browser:
    """One person's browser session on Acme (cookies kept, redirects not followed)."""

    def __init__(self, http: httpx.AsyncClient, origin: str, password: str) -> None:
        self.http = http
        self.origin = origin
        self.password = password

    async def get(self, path: str) -> httpx.Response:
        return await self.http.get(self.origin + path)

    async def post(
        self, path: str, page: httpx.Response, form: list[tuple[str, str]]
    ) -> httpx.Response:
        found = _CSRF.search(page.text)
        assert found, f"no CSRF token on {page.url}"
        return await self.http.post(
            self.origin + path,
            content=urlencode([("csrfmiddlewaretoken", found.group(1)), *form]).encode(),
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Origin": self.origin,
                "Referer": str(page.url),
            },
        )

    async def change_password(self, account: str, new_password: str) -> httpx.Response:
        """Log in as ``account`` and change its password on Acme's own page."""
        await self.log_in(account)
        form = await self.get("/account/password")
        return await self.post(
            "/account/password",
            form,
            [
                ("old_password", self.password),
                ("new_password1", new_password),
                ("new_password2", new_password),
            ],
        )

    async def log_in(self, account: str) -> None:
        page = await self.get("/account/login")
        done = await self.post(
            "/account/login", page, [("username", account), ("password", self.password)]
        )
        assert done.status_code == 302, f"login as {account} failed: {done.status_code}"


class AcmeUser:
    """The conformance suite's ``UserDriver`` for the example project."""

    accounts = ("acct-1", "acct-2")

    def __init__(
        self,
        browser_client: Callable[[], httpx.AsyncClient],
        origin: str,
        other_identity: AgentIdentity,
        *,
        password: str = PASSWORD,
        forget: Callable[[str], None] | None = None,
        revise: Callable[[str], None] | None = None,
        performed: Callable[[str], int] | None = None,
        pass_time: Callable[[float], None] | None = None,
    ) -> None:
        """``browser_client`` makes a person's HTTP client (a new cookie jar each time);
        what the company's operator does, when it can: ``forget(conversation_id)`` prunes a
        conversation's events, ``revise(operation_id)`` changes a proposal's terms,
        ``performed(operation_id)`` counts the runs of its action. ``pass_time(seconds)``:
        the agent's clock lets a wait pass for its next request instead of a sleep
        (``RealClock.lend``); the company's clock is real, so this is not the suite's
        ``clock`` capability (moving time for both)."""
        self.browser_client = browser_client
        self.origin = origin
        self.password = password
        self.other_identity: AgentIdentity | None = other_identity
        self.forget = forget
        self.reviser = revise
        self.counter = performed
        self.pass_time = pass_time
        offered = {"forget_events": forget, "revise": revise, "performed": performed}
        self.capabilities = frozenset(
            {"disconnect", "second_identity", "direct_sign_in"}
            | {name for name, hook in offered.items() if hook is not None}
        )

    def browser(self) -> Browser:
        return Browser(self.browser_client(), self.origin, self.password)

    async def approve_device(
        self, user_code: str, *, account: str, scopes: Sequence[str] | None = None
    ) -> None:
        browser = self.browser()
        await browser.log_in(account)
        consent = await browser.get(f"/device?user_code={user_code}")
        assert consent.status_code == 200 and "Allow" in consent.text, consent.text
        offered = re.findall(r'name="scope" value="([^"]+)"', consent.text)
        chosen = [s for s in offered if scopes is None or s in scopes]
        form = [("user_code", user_code), ("decision", "approve")]
        done = await browser.post("/device", consent, form + [("scope", s) for s in chosen])
        assert "is connected" in done.text, done.text

    async def wait(self, seconds: float) -> None:
        """The suite waits out a device sign-in's polling interval here before its poll."""
        if self.pass_time is None:
            await asyncio.sleep(seconds)
        else:
            self.pass_time(seconds)

    async def disconnect(self, client_id: str, account: str) -> None:
        browser = self.browser()
        await browser.log_in(account)
        page = await browser.get("/account/agents")
        done = await browser.post("/account/agents", page, [("client_id", client_id)])
        assert done.status_code == 302, done.status_code

    async def approve_authorization(
        self, authorization_url: str, *, account: str, scopes: Sequence[str] | None = None
    ) -> str:
        """Direct Sign-In: approve on the authorization page; the callback URL it sends to."""
        browser = self.browser()
        await browser.log_in(account)
        path = authorization_url.removeprefix(self.origin)
        consent = await browser.get(path)
        assert consent.status_code == 200 and "Allow" in consent.text, consent.text
        offered = re.findall(r'name="scope" value="([^"]+)"', consent.text)
        chosen = [s for s in offered if scopes is None or s in scopes]
        done = await browser.post(
            path, consent, [("decision", "approve"), *(("scope", s) for s in chosen)]
        )
        assert done.status_code == 302, done.status_code
        return done.headers["location"]

    async def revise(self, operation_id: str) -> None:
        if self.reviser is None:
            raise NotImplementedError("not a capability of this driver")
        await asyncio.to_thread(self.reviser, operation_id)

    async def forget_events(self, conversation_id: str) -> None:
        if self.forget is None:
            raise NotImplementedError("not a capability of this driver")
        await asyncio.to_thread(self.forget, conversation_id)

    async def performed(self, operation_id: str) -> int:
        if self.counter is None:
            raise NotImplementedError("not a capability of this driver")
        return await asyncio.to_thread(self.counter, operation_id)
