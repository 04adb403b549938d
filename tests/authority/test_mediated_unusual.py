"""Mediated Sign-In asks for a one-time code when a sign-in looks unusual (PAP-4.7-04).

By default (``MEDIATED_CODE_WHEN``, ``MEDIATED_SEND_CODE``) a sign-in that Django's
``authenticate()`` let in must also prove a code e-mailed to the account's user when this
client has never signed the account in before, or when wrong passwords came first in the
window. Through the SDK's mediated client, with Django's locmem e-mail backend.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage
from django.core.mail.backends.base import BaseEmailBackend

from poppy_django.authority.models import MediatedSignIn
from tests.authority import mediated_checks
from tests.authority.channels import ChannelAgent
from tests.authority.driver import PASSWORD
from tests.authority.sdk_agent import World
from tests.authority.test_mediated_sign_in import WRONG, _in_any_row, over_tls

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]

ADDRESS = "alice@example.com"
ACCT_1 = {"username": "acct-1", "password": PASSWORD}


@pytest.fixture
def alice(customers: None) -> None:
    """acct-1's user has an e-mail address (the other tests' users have none)."""
    get_user_model().objects.filter(username="acct-1").update(email=ADDRESS)


def code_in(mail: EmailMessage) -> str:
    found = re.findall(r"\b\d{6}\b", str(mail.body))
    assert len(found) == 1, mail.body
    return found[0]


def test_a_clients_first_sign_in_needs_the_emailed_code_and_its_next_does_not(
    world: World, alice: None, mailoutbox: list[EmailMessage], caplog: pytest.LogCaptureFixture
) -> None:
    agent = ChannelAgent(world)
    user = "usr_unusual_first_00001"
    bodies = world.record_responses()

    async def scenario() -> tuple[Any, Any, Any]:
        session = await agent.session(user)
        asked = await agent.sign_in(user, session, ACCT_1, ("poppy:read",))
        done = await agent.submit_code(user, session, asked.reference, code_in(mailoutbox[0]))
        again = await agent.sign_in(user, await agent.session(user), ACCT_1, ("poppy:read",))
        return asked, done, again

    with caplog.at_level(logging.DEBUG):
        asked, done, again = over_tls(world, scenario)
    assert asked.status == "code_required" and asked.sent_to == "a•••@example.com"
    assert done.status == "complete" and done.token.signed_in
    assert again.status == "complete"  # this client has signed acct-1 in before
    [mail] = mailoutbox
    code = code_in(mail)
    assert mail.to == [ADDRESS] and "Acme Outfitters" in mail.subject
    assert "one-time code" in mail.body and "5 minutes" in mail.body
    # The code is the User's alone: in no log, no answer, no row (only its hash).
    assert code not in caplog.text
    assert bodies and not any(code in body for body in bodies)
    record = MediatedSignIn.objects.get()
    assert record.code_hash == hashlib.sha256(code.encode()).hexdigest()
    assert not _in_any_row(code)


def test_wrong_passwords_first_need_a_code_from_a_known_client(
    world: World, alice: None, mailoutbox: list[EmailMessage]
) -> None:
    agent = ChannelAgent(world)
    user = "usr_unusual_guessed_0001"

    async def scenario() -> list[Any]:
        first = await agent.session(user)
        asked = await agent.sign_in(user, first, ACCT_1, ("poppy:read",))
        await agent.submit_code(user, first, asked.reference, code_in(mailoutbox[-1]))
        session = await agent.session(user)
        wrong = await agent.sign_in(
            user, session, {"username": "acct-1", "password": WRONG}, ("poppy:read",)
        )
        right = await agent.sign_in(user, session, ACCT_1, ("poppy:read",))
        # The right password again does not make the wrong one forgotten.
        resent = await agent.sign_in(user, session, ACCT_1, ("poppy:read",))
        done = await agent.submit_code(user, session, resent.reference, code_in(mailoutbox[-1]))
        return [wrong, right, resent, done]

    wrong, right, resent, done = over_tls(world, scenario)
    assert wrong.status == "failed"
    assert right.status == "code_required" and right.sent_to == "a•••@example.com"
    assert resent.status == "code_required"
    assert done.status == "complete"
    assert len(mailoutbox) == 3


def test_without_an_email_address_the_sign_in_completes_with_a_warning(
    world: World,
    customers: None,
    mailoutbox: list[EmailMessage],
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = ChannelAgent(world)
    user = "usr_unusual_no_email_001"

    async def scenario() -> Any:
        return await agent.sign_in(user, await agent.session(user), ACCT_1, ("poppy:read",))

    with caplog.at_level(logging.WARNING, logger="poppy_django.authority"):
        done = over_tls(world, scenario)
    assert done.status == "complete"
    assert not mailoutbox
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "no one-time code" in warnings[0]
    assert world.atlas.client_id in warnings[0] and PASSWORD not in warnings[0]


class Unreachable(BaseEmailBackend):
    """An e-mail backend whose server is down."""

    def send_messages(self, email_messages: Any) -> int:
        raise ConnectionRefusedError("the mail server is down")


def test_a_mail_that_cannot_be_sent_signs_in_without_a_code(
    world: World, alice: None, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.EMAIL_BACKEND = f"{__name__}.Unreachable"
    agent = ChannelAgent(world)
    user = "usr_unusual_mail_down_01"

    async def scenario() -> Any:
        return await agent.sign_in(user, await agent.session(user), ACCT_1, ("poppy:read",))

    with caplog.at_level(logging.WARNING, logger="poppy_django.authority"):
        done = over_tls(world, scenario)
    assert done.status == "complete"
    logged = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert (
        logging.ERROR,
        "A Mediated Sign-In code could not be e-mailed (ConnectionRefusedError)",
    ) in logged
    assert any("no one-time code" in message for _, message in logged)


def test_with_code_when_none_no_code_is_ever_asked_for(
    world: World, alice: None, acme_settings: Any, mailoutbox: list[EmailMessage]
) -> None:
    acme_settings.POPPY_AUTHORITY = {**acme_settings.POPPY_AUTHORITY, "MEDIATED_CODE_WHEN": None}
    agent = ChannelAgent(world)
    user = "usr_unusual_never_00001"

    async def scenario() -> list[str]:
        session = await agent.session(user)
        wrong = await agent.sign_in(
            user, session, {"username": "acct-1", "password": WRONG}, ("poppy:read",)
        )
        right = await agent.sign_in(user, session, ACCT_1, ("poppy:read",))
        return [wrong.status, right.status]

    assert over_tls(world, scenario) == ["failed", "complete"]
    assert not mailoutbox


def test_the_code_can_be_sent_another_way(
    world: World, alice: None, acme_settings: Any, mailoutbox: list[EmailMessage]
) -> None:
    acme_settings.POPPY_AUTHORITY = {
        **acme_settings.POPPY_AUTHORITY,
        "MEDIATED_SEND_CODE": "tests.authority.mediated_checks.text_code",
    }
    agent = ChannelAgent(world)
    user = "usr_unusual_texted_0001"

    async def scenario() -> tuple[Any, Any]:
        session = await agent.session(user)
        asked = await agent.sign_in(user, session, ACCT_1, ("poppy:read",))
        code = mediated_checks.SENT["acct-1"]
        return asked, await agent.submit_code(user, session, asked.reference, code)

    asked, done = over_tls(world, scenario)
    assert asked.status == "code_required" and asked.sent_to == "+1 *** *** 42"
    assert done.status == "complete"
    assert not mailoutbox


def test_a_check_that_asks_for_a_code_itself_is_not_asked_twice(
    world: World, alice: None, acme_settings: Any, mailoutbox: list[EmailMessage]
) -> None:
    acme_settings.POPPY_AUTHORITY = {
        **acme_settings.POPPY_AUTHORITY,
        "MEDIATED_CHECK": "tests.authority.mediated_checks.with_a_code",
    }
    agent = ChannelAgent(world)
    user = "usr_unusual_own_code_001"

    async def scenario() -> Any:
        return await agent.sign_in(user, await agent.session(user), ACCT_1, ("poppy:read",))

    asked = over_tls(world, scenario)
    assert asked.status == "code_required" and asked.sent_to == "+1 *** *** 42"
    assert not mailoutbox
