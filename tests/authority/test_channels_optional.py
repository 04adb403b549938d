"""Each channel is off unless its setting turns it on: then it is neither announced nor served.

Also the browser session under Django's synchronous handler (the TLS tests run the example
under ASGI): the middleware works in both.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client as DjangoClient

from tests.authority.channels import BROWSER_ENDPOINT, ChannelAgent, browser_claims, sign
from tests.authority.sdk_agent import DOMAIN, World

pytestmark = pytest.mark.django_db(transaction=True)


def test_channels_that_are_off_are_not_announced_and_answer_404(
    world: World, acme_settings: Any
) -> None:
    acme_settings.POPPY_AUTHORITY = {
        **acme_settings.POPPY_AUTHORITY,
        "BROWSER_SESSIONS": False,
        "MEDIATED_FIELDS": None,
    }
    acme_settings.POPPY = {**acme_settings.POPPY, "FEEDBACK": False}
    browser = DjangoClient(HTTP_HOST=DOMAIN)
    document = browser.get("/.well-known/poppy.json", secure=True).json()
    assert "web" not in document and "feedback" not in document
    assert "mediated" not in document["auth"]
    for path in ("/poppy/browser-session", "/poppy/sign-in", "/poppy/sign-in/x", "/poppy/feedback"):
        answer = browser.post(path, secure=True)
        assert answer.status_code == 404 and answer.json()["error"] == "not_found", path


def test_a_browser_session_through_djangos_synchronous_handler(world: World) -> None:
    agent = ChannelAgent(world)
    user = "usr_browser_sync_000001"

    async def start() -> Any:
        await world.discover()
        return await agent.session(user)

    session = asyncio.run(start())
    browser = DjangoClient(HTTP_HOST=DOMAIN)
    assertion = sign(world, browser_claims(world, user, session.session_id))
    joined = browser.post(
        BROWSER_ENDPOINT.removeprefix(f"https://{DOMAIN}"),
        urlencode({"assertion": assertion}),
        content_type="application/x-www-form-urlencoded",
        secure=True,
    )
    assert joined.status_code == 303
    page = browser.get("/account/session", secure=True)
    assert 'data-signed-in="false"' in page.content.decode()
