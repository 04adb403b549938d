"""Ownership: client_id + user_id, and once used signed in, the account."""

from __future__ import annotations

from typing import Any

import pytest

from poppy_django.models import Conversation
from tests.agents import PersonalAgent
from tests.wire.wire_support import assert_error, quiet_start, rows

pytestmark = pytest.mark.django_db(transaction=True)


def attempts(agent: PersonalAgent, conversation_id: str) -> dict[str, Any]:
    """Every route on the conversation (and opening a Direct Conversation from it)."""
    message = {"id": f"own-{conversation_id[-6:]}", "sender": "agent", "text": "hi"}
    return {
        "read": agent.read(conversation_id),
        "read wait": agent.read(conversation_id, "?wait=0.1"),
        "stream": agent.read(conversation_id, HTTP_ACCEPT="text/event-stream"),
        "message": agent.post(f"/{conversation_id}/messages", {"message": message}),
        "handoff": agent.post(f"/{conversation_id}/handoff"),
        "close": agent.post(f"/{conversation_id}/close"),
        "direct": agent.post("", {"message": message, "parent_conversation_id": conversation_id}),
    }


def unknown_bodies(agent: PersonalAgent) -> dict[str, Any]:
    return {name: r.json() for name, r in attempts(agent, "cnv_0123456789abcdef").items()}


@pytest.mark.parametrize("who", ["another client", "another user"])
def test_another_personal_agent_or_user_sees_not_found(agent, who):
    conversation_id = quiet_start(agent)
    other = (
        PersonalAgent(client_id="https://other.example/pa", user_id=agent.user_id)
        if who == "another client"
        else PersonalAgent(client_id=agent.client_id)
    )
    before = rows()
    answers = attempts(other, conversation_id)
    for name, response in answers.items():
        assert_error(response, 404, "conversation_not_found")
    assert rows() == before
    # The same body as an unknown id: nothing tells that the conversation exists.
    unknown = unknown_bodies(other)
    assert {name: r.json() for name, r in answers.items()} == unknown
    assert Conversation.objects.get(pk=conversation_id).status == "idle"


def test_another_account_sees_not_found(acct1):
    conversation_id = quiet_start(acct1)
    assert Conversation.objects.get(pk=conversation_id).account_id == "acct-1"
    acct2 = acct1.signed_in("acct-2", ("poppy:read", "poppy:write"))
    before = rows()
    answers = attempts(acct2, conversation_id)
    for response in answers.values():
        assert_error(response, 404, "conversation_not_found")
    assert rows() == before
    assert {name: r.json() for name, r in answers.items()} == unknown_bodies(acct2)


def test_the_same_user_signed_out_on_an_account_conversation_must_sign_in(acct1):
    conversation_id = quiet_start(acct1)
    signed_out = PersonalAgent(acct1.client_id, acct1.user_id)
    before = rows()
    for response in attempts(signed_out, conversation_id).values():
        assert_error(response, 403, "sign_in_required")
        assert response["WWW-Authenticate"] == 'DPoP error="sign_in_required"'
    assert rows() == before
    # Signed in again, it is all there.
    assert acct1.read(conversation_id).status_code == 200


def test_a_conversation_used_signed_in_is_bound_to_the_account(agent):
    conversation_id = quiet_start(agent)
    assert Conversation.objects.get(pk=conversation_id).account_id is None
    # Still the User's while signed out.
    assert agent.read(conversation_id).status_code == 200
    signed_in = agent.signed_in("acct-1", ("poppy:read",))
    assert signed_in.send(conversation_id, None, context={"a": 1}).status_code == 202
    assert Conversation.objects.get(pk=conversation_id).account_id == "acct-1"
    assert signed_in.read(conversation_id).status_code == 200
    assert_error(agent.read(conversation_id), 403, "sign_in_required")
    other_account = agent.signed_in("acct-2", ("poppy:read",))
    assert_error(other_account.read(conversation_id), 404, "conversation_not_found")


def test_a_conversation_started_signed_in_belongs_to_the_account(acct1):
    conversation_id = quiet_start(acct1)
    assert acct1.read(conversation_id).status_code == 200
    same_account_other_scopes = acct1.signed_in("acct-1", ())
    assert same_account_other_scopes.read(conversation_id).status_code == 200


def test_handoff_signed_in_binds_the_conversation(agent):
    conversation_id = quiet_start(agent)
    signed_in = agent.signed_in("acct-1")
    assert signed_in.post(f"/{conversation_id}/handoff").status_code == 202
    assert Conversation.objects.get(pk=conversation_id).account_id == "acct-1"
    assert_error(agent.read(conversation_id), 403, "sign_in_required")
