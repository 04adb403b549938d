"""A real browser joins the Session: Debian's Chromium (Playwright) follows the form-post handoff.

The SDK's ``BrowserSessionClient`` signs the assertion and hands it to the host's
``pap.browserFormPost`` contribution; here that contribution is headless Chromium, which
submits the assertion as a top-level form POST over TLS to ``acme.example`` (mapped to a
local uvicorn server serving the example project), gets the Django session cookie, follows
the ``303`` and shows Acme's page with the Session's scopes. After the User signs out, the
next page load shows a visitor.
"""

from __future__ import annotations

import asyncio
import datetime
import html
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.core.asgi import get_asgi_application
from personal_agent_protocol.demo.sockets import served_over_tls
from pydantic import SecretStr

from tests.authority.channels import ChannelAgent
from tests.authority.driver import PASSWORD
from tests.authority.sdk_agent import DOMAIN, ORIGIN, World
from tests.desk.test_browser import ARTIFACTS, CHROMIUM_ARGS, chromium
from tests.threaded_server import serve

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("shop_orders"),
    pytest.mark.timeout(240),
]


def _certificate(directory: Path) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for acme.example: (cert.pem, key.pem)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, DOMAIN)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(DOMAIN)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class ChromiumFormPost:
    """``pap.browserFormPost`` as a browser does it: a page's form, submitted, followed."""

    def __init__(self, page: Any) -> None:
        self.page = page

    async def post(self, endpoint: str, fields: dict[str, SecretStr]) -> None:
        inputs = "".join(
            f'<input type="hidden" name="{html.escape(name)}" '
            f'value="{html.escape(value.get_secret_value())}">'
            for name, value in fields.items()
        )
        await self.page.set_content(
            f'<form method="post" action="{html.escape(endpoint)}">{inputs}</form>'
        )
        async with self.page.expect_navigation():
            await self.page.evaluate("document.forms[0].submit()")


def test_chromium_follows_the_handoff_and_the_page_sees_the_sessions_scopes(
    world: World, customers: None, tmp_path: Path
) -> None:
    playwright_api = pytest.importorskip("playwright.async_api")
    executable = chromium()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    user = "usr_chromium_user_000001"
    return_to = f"{ORIGIN}/account/session"

    async def scenario(port: int) -> dict[str, Any]:
        async with (
            served_over_tls(world.network),
            playwright_api.async_playwright() as playwright,
        ):
            browser = await playwright.chromium.launch(
                executable_path=executable,
                args=[*CHROMIUM_ARGS, f"--host-resolver-rules=MAP {DOMAIN} 127.0.0.1:{port}"],
            )
            # TLS with a throwaway self-signed certificate: Chromium is told not to verify it.
            context = await browser.new_context(ignore_https_errors=True)
            page = await context.new_page()
            agent = ChannelAgent(world, form_post=ChromiumFormPost(page))
            try:
                await world.discover()
                session = await agent.session(user)
                signed = await agent.sign_in(
                    user,
                    session,
                    {"username": "acct-1", "password": PASSWORD},
                    ("poppy:read", "poppy:write"),
                )
                await agent.join(user, session.session_id, return_to)
                await page.wait_for_url(return_to)
                seen: dict[str, Any] = {
                    "url": page.url,
                    "scopes": await page.get_attribute("#poppy-session", "data-scopes"),
                    "text": await page.text_content("#poppy-session"),
                    "cookies": await context.cookies(ORIGIN),
                }
                await page.screenshot(path=str(ARTIFACTS / "browser-session.png"))
                await page.goto(f"{ORIGIN}/account/orders")
                seen["orders"] = await page.text_content("#orders")
                await agent.sign_out(user, signed.account_token_reference)
                await page.goto(return_to)
                seen["after"] = await page.text_content("body")
                return seen
            finally:
                await browser.close()

    # The example project over TLS on a free loopback port, for Chromium to dial.
    with serve(get_asgi_application(), tls=_certificate(tmp_path)) as url:
        seen = asyncio.run(scenario(int(url.rsplit(":", 1)[1])))
    assert seen["url"] == return_to
    assert seen["scopes"] == "poppy:read poppy:write"
    assert "acct-1" in seen["text"]
    (cookie,) = [c for c in seen["cookies"] if c["name"] == "sessionid"]
    assert cookie["secure"] and cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    assert cookie["expires"] == -1  # a session cookie: no lifetime of its own
    assert "A-1" in seen["orders"] and "B-1" not in seen["orders"]
    assert "browses as a visitor" in seen["after"] and "acct-1" not in seen["after"]
