"""Approvals bound to the account's state (issue 51, R1/R8), on the paths the multi-process
module (``test_hostile_account_changes``) leaves out: a Mediated Sign-In waiting for its
one-time code, and a rotated ``SECRET_KEY`` (Django's fallbacks keep sign-ins, as they keep
sessions)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.core.mail import EmailMessage
from django.db import connection

from poppy_django.authority.models import Grant
from tests.agents import PersonalAgent
from tests.authority.channels import ChannelAgent
from tests.authority.driver import PASSWORD
from tests.authority.sdk_agent import World
from tests.authority.test_hostile_grants import refresh
from tests.authority.test_mediated_sign_in import over_tls
from tests.authority.test_pages import signed_in

ACCT_1 = {"username": "acct-1", "password": PASSWORD}


@pytest.fixture
def alice(customers: None) -> None:
    get_user_model().objects.filter(username="acct-1").update(email="alice@example.com")


def _code(mail: EmailMessage) -> str:
    return re.findall(r"\b\d{6}\b", str(mail.body))[0]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("shop_orders")
@pytest.mark.parametrize("change", ["save", "bulk update"])
def test_a_mediated_sign_in_waiting_for_its_code_is_void_once_the_password_changes(
    world: World, alice: None, mailoutbox: list[EmailMessage], change: str
) -> None:
    agent = ChannelAgent(world)
    user = "usr_state_mediated_00001"

    def change_password() -> None:
        if change == "save":  # the signal voids it at once
            person = get_user_model().objects.get(username="acct-1")
            person.set_password("changed-meanwhile")
            person.save()
        else:  # no signal: the code's exchange finds the account changed
            get_user_model().objects.filter(username="acct-1").update(
                password=make_password("changed-meanwhile")
            )

    async def scenario() -> tuple[Any, Any, Any]:
        session = await agent.session(user)
        asked = await agent.sign_in(user, session, ACCT_1, ("poppy:read",))
        await _in_thread(change_password)
        voided = await agent.submit_code(user, session, asked.reference, _code(mailoutbox[0]))
        # The person signs in again, with the new password and a new code.
        again = await agent.sign_in(
            user, session, {**ACCT_1, "password": "changed-meanwhile"}, ("poppy:read",)
        )
        done = await agent.submit_code(user, session, again.reference, _code(mailoutbox[-1]))
        return asked, voided, done

    asked, voided, done = over_tls(world, scenario)
    assert asked.status == "code_required"
    assert voided.status == "failed"
    assert done.status == "complete" and done.token.signed_in


async def _in_thread(function: Any) -> None:
    """``function`` on a thread of its own (the event loop may not query), its database
    connection closed after it."""

    def run() -> None:
        try:
            function()
        finally:
            connection.close()

    await asyncio.to_thread(run)


@pytest.mark.django_db
def test_a_rotated_secret_key_keeps_sign_ins_through_its_fallbacks(
    acme_settings: Any, customers: None
) -> None:
    """While the old key is a fallback, a refresh rebinds the sign-in to the new key (as
    Django's ``get_user`` does a session's hash); one not refreshed before the old key is
    retired is refused, as that user's Django sessions would be."""
    hand = PersonalAgent.with_identity()
    refreshed_session, refreshed_token = signed_in(hand)
    idle_session, idle_token = signed_in(hand)
    assert all(grant.account_state for grant in Grant.objects.all())  # bound to acct-1's user
    old_key = acme_settings.SECRET_KEY
    acme_settings.SECRET_KEY = "a-new-secret-key-" + "x" * 40
    acme_settings.SECRET_KEY_FALLBACKS = [old_key]
    rotated = refresh(hand, refreshed_token, refreshed_session)
    assert rotated.status_code == 200, rotated.content
    acme_settings.SECRET_KEY_FALLBACKS = []  # the old key retired
    again = refresh(hand, rotated.json()["refresh_token"], refreshed_session)
    assert again.status_code == 200, again.content
    refused = refresh(hand, idle_token, idle_session)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
    assert Grant.objects.filter(revoked_at=None).count() == 1
