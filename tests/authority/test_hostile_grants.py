"""Replayed credentials end the sign-in; malformed forms are JSON errors; codes resist
guessing (issue 25: findings 5, 6, 7 and 9)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from poppy_django.authority.models import Client, DeviceAuthorization, Grant, Session
from poppy_django.authority.status import session_is_active
from poppy_django.verifier.principal import Principal
from tests.agents import JWT_BEARER, PersonalAgent
from tests.authority.test_pages import (
    authorize_query,
    browser,
    device_codes,
    get,
    poll,
    post,
    signed_in,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def hand(acme_settings: Any, customers: None) -> PersonalAgent:
    return PersonalAgent.with_identity()


def refresh(hand: PersonalAgent, account_token: str, session_id: str) -> Any:
    form = {"grant_type": "refresh_token", "refresh_token": account_token, "session_id": session_id}
    return hand.post_form("/oauth/token", {**form, **hand.client_form()}, dpop=hand.proof())


def principal(hand: PersonalAgent, session_id: str) -> Principal:
    return Principal(
        client_id=hand.client_id,
        user_id="usr_hand_000000000000001",
        session_id=session_id,
        signed_in=True,
        account_id="acct-1",
    )


# Finding 5: a replayed rotated Account Token revokes the whole sign-in ---------------------


def test_replaying_a_rotated_account_token_revokes_its_family_and_signs_out(
    hand: PersonalAgent,
) -> None:
    session_id, first = signed_in(hand)
    other_session = hand.start_session(user="usr_hand_000000000000001").json()["session_id"]
    rotated = refresh(hand, first, session_id)
    assert rotated.status_code == 200
    second = rotated.json()["refresh_token"]
    third = refresh(hand, second, other_session).json()["refresh_token"]  # both signed in
    assert session_is_active(principal(hand, other_session)) is True
    replayed = refresh(hand, first, session_id)  # the attacker's (or the victim's) copy
    assert replayed.status_code == 400 and replayed.json()["error"] == "invalid_grant"
    assert Grant.objects.get().revoked_at is not None
    for token in (second, third):
        assert refresh(hand, token, session_id).json()["error"] == "invalid_grant"
    for session in (session_id, other_session):
        assert Session.objects.get(session_id=session).grant is None
        assert session_is_active(principal(hand, session)) == "signed_out"


def test_a_rotated_token_replayed_deeper_in_the_family_revokes_it_too(hand: PersonalAgent) -> None:
    session_id, first = signed_in(hand)
    second = refresh(hand, first, session_id).json()["refresh_token"]
    third = refresh(hand, second, session_id).json()["refresh_token"]
    assert refresh(hand, second, session_id).json()["error"] == "invalid_grant"
    assert refresh(hand, third, session_id).json()["error"] == "invalid_grant"
    assert Session.objects.get(session_id=session_id).grant is None


def test_another_clients_replay_of_a_rotated_token_revokes_nothing(hand: PersonalAgent) -> None:
    session_id, first = signed_in(hand)
    second = refresh(hand, first, session_id).json()["refresh_token"]
    stranger = PersonalAgent.with_identity("stranger.example")
    stranger_session = stranger.start_session().json()["session_id"]
    form = {"grant_type": "refresh_token", "refresh_token": first, "session_id": stranger_session}
    answer = stranger.post_form(
        "/oauth/token", {**form, **stranger.client_form()}, dpop=stranger.proof()
    )
    assert answer.json()["error"] == "invalid_grant"
    assert Grant.objects.get().revoked_at is None
    assert refresh(hand, second, session_id).status_code == 200


# Finding 6: a replayed authorization code revokes what its first use granted --------------


def _direct_code(hand: PersonalAgent, verifier: str) -> str:
    query = authorize_query(hand, verifier)
    answer = post(browser("acct-1"), query, {"decision": "approve", "scope": ["poppy:read"]})
    return str(answer["Location"].split("code=", 1)[1].split("&", 1)[0])


def _exchange(hand: PersonalAgent, code: str, verifier: str, session_id: str) -> Any:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": hand.identity.metadata["redirect_uris"][0],
        "session_id": session_id,
        "code_verifier": verifier,
    }
    return hand.post_form("/oauth/token", {**form, **hand.client_form()}, dpop=hand.proof())


@pytest.mark.parametrize("replay_verifier", ["right", "wrong"])
def test_a_replayed_authorization_code_revokes_its_sign_in(
    hand: PersonalAgent, replay_verifier: str
) -> None:
    verifier = "k" * 50
    session_id = hand.start_session().json()["session_id"]
    code = _direct_code(hand, verifier)
    first = _exchange(hand, code, verifier, session_id)
    assert first.status_code == 200 and first.json()["signed_in"] is True
    account_token = first.json()["refresh_token"]
    again = hand.start_session().json()["session_id"]
    replay = _exchange(hand, code, verifier if replay_verifier == "right" else "w" * 50, again)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert Grant.objects.get().revoked_at is not None
    assert Session.objects.get(session_id=session_id).grant is None
    assert Session.objects.get(session_id=again).grant is None
    assert refresh(hand, account_token, session_id).json()["error"] == "invalid_grant"


def test_a_wrong_verifier_before_the_first_use_revokes_nothing(hand: PersonalAgent) -> None:
    verifier = "k" * 50
    session_id = hand.start_session().json()["session_id"]
    code = _direct_code(hand, verifier)
    assert _exchange(hand, code, "w" * 50, session_id).json()["error"] == "invalid_grant"
    assert _exchange(hand, code, verifier, session_id).status_code == 200
    assert Grant.objects.get().revoked_at is None


# Finding 7: NULs and broken brackets are JSON OAuth errors, never a 500 -------------------

BAD_CLIENT_IDS = [
    "https://hand.example/agent.json\x00",
    "\x00",
    "https://[::1/agent.json",
    "https://[hand.example/agent.json",
    "https://hand.example]/agent.json",
    "https://[::1]]/agent.json",
    "https://[v1.x]/agent.json",
]


@pytest.mark.parametrize("client_id", BAD_CLIENT_IDS)
@pytest.mark.parametrize("path", ["/oauth/token", "/oauth/device_authorization", "/oauth/revoke"])
def test_a_broken_client_id_is_a_json_error_at_each_endpoint(
    hand: PersonalAgent, client_id: str, path: str
) -> None:
    form = {
        "grant_type": JWT_BEARER,
        "assertion": hand.signed(hand.claims("usr_1")),
        "scope": "poppy:read",
        "token": "x",
        **hand.client_form(client_id=client_id),
    }
    answer = hand.post_form(path, form, dpop=hand.proof())
    assert answer.status_code in (400, 401)
    assert answer["Content-Type"] == "application/json"
    assert answer.json()["error"] in ("invalid_client", "invalid_request")
    assert Client.objects.count() == 0


@pytest.mark.parametrize("client_id", BAD_CLIENT_IDS)
def test_a_broken_client_id_on_the_authorization_page_is_its_error_page(
    hand: PersonalAgent, client_id: str
) -> None:
    page = get(browser("acct-1"), authorize_query(hand, "v" * 43, client_id=client_id))
    assert page.status_code == 400 and "not valid" in page.content.decode()


def _grant_form(hand: PersonalAgent, grant: str) -> dict[str, str]:
    """A token request of ``grant`` whose credential is good: only the session_id is not."""
    if grant == "renewal":
        return {"grant_type": JWT_BEARER, "assertion": hand.signed(hand.claims("usr_1"))}
    if grant == "refresh":
        return {"grant_type": "refresh_token", "refresh_token": signed_in(hand)[1]}
    if grant == "code":
        return {
            "grant_type": "authorization_code",
            "code": _direct_code(hand, "k" * 50),
            "redirect_uri": hand.identity.metadata["redirect_uris"][0],
            "code_verifier": "k" * 50,
        }
    codes = device_codes(hand)
    approval = {"user_code": codes["user_code"], "decision": "approve", "scope": ["poppy:read"]}
    post(browser("acct-1"), "/device", approval)
    return {"grant_type": "urn:ietf:params:oauth:grant-type:device_code", **codes}


@pytest.mark.parametrize("grant", ["renewal", "device", "refresh", "code"])
@pytest.mark.parametrize("session_id", ["ses_\x00", "\x00", "ses_ä", "s" * 65])
def test_a_broken_session_id_is_a_json_error_at_each_grant(
    hand: PersonalAgent, grant: str, session_id: str
) -> None:
    body = {**_grant_form(hand, grant), "session_id": session_id, **hand.client_form()}
    answer = hand.post_form("/oauth/token", body, dpop=hand.proof())
    assert answer.status_code == 400
    assert answer.json()["error"] in ("invalid_request", "invalid_session")


@pytest.mark.parametrize(
    "challenge", ["c" * 42 + "\x00", "\x00" * 43, "c" * 44, "c" * 42 + "=", "c" * 42 + "+"]
)
def test_a_broken_code_challenge_goes_back_as_invalid_request(
    hand: PersonalAgent, challenge: str
) -> None:
    person = browser("acct-1")
    query = (
        authorize_query(hand, "v" * 43)
        + "&"
        + "code_challenge="
        + challenge.replace("\x00", "%00").replace("+", "%2B").replace("=", "%3D")
    )
    answer = post(person, query, {"decision": "approve", "scope": ["poppy:read"]})
    assert answer.status_code == 302 and "error=invalid_request" in answer["Location"]


@pytest.mark.parametrize("client_id", BAD_CLIENT_IDS + ["https://hand.example/agent.json/"])
def test_a_broken_client_id_in_the_disconnect_form_disconnects_nothing(
    hand: PersonalAgent, client_id: str
) -> None:
    signed_in(hand)
    done = post(browser("acct-1"), "/account/agents", {"client_id": client_id})
    assert done.status_code == 302
    assert Grant.objects.get().revoked_at is None


# Finding 9: user codes cannot be guessed on the device page -------------------------------


def _guess(person: Any, code: str, address: str = "198.51.100.7") -> Any:
    return person.get(
        f"/device?user_code={code}", secure=True, HTTP_HOST="acme.example", REMOTE_ADDR=address
    )


def test_wrong_user_codes_are_limited_per_user_and_logged_without_the_code(
    hand: PersonalAgent, acme_settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    acme_settings.POPPY_AUTHORITY = {
        **acme_settings.POPPY_AUTHORITY,
        "DEVICE_CODE_FAILURES_PER_USER": 5,
    }
    codes = device_codes(hand)
    person = browser("acct-1")
    wrong = [f"WXYZ-{n:04d}".replace("0", "B") for n in range(5)]
    with caplog.at_level(logging.WARNING, logger="poppy_django.authority"):
        for code in wrong:
            page = _guess(person, code)
            assert page.status_code == 200 and "unknown or has expired" in page.content.decode()
        limited = _guess(person, codes["user_code"])  # even the right code, now
    assert limited.status_code == 429 and "Too many wrong codes" in limited.content.decode()
    assert "Allow" not in limited.content.decode()
    logged = [r.getMessage() for r in caplog.records if "wrong user code" in r.getMessage()]
    assert len(logged) == 5
    assert not any(
        code in line or code.replace("-", "") in line for code in wrong for line in logged
    )
    # Another user at another address is not held up by this one's guesses.
    other = _guess(browser("acct-2"), codes["user_code"], address="203.0.113.9")
    assert other.status_code == 200 and "Allow" in other.content.decode()
    assert DeviceAuthorization.objects.get().account_id is None


def test_wrong_user_codes_are_limited_per_address_across_users(
    hand: PersonalAgent, acme_settings: Any
) -> None:
    acme_settings.POPPY_AUTHORITY = {
        **acme_settings.POPPY_AUTHORITY,
        "DEVICE_CODE_FAILURES_PER_ADDRESS": 4,
    }
    codes = device_codes(hand)
    for account in ("acct-1", "acct-2"):
        person = browser(account)
        for _ in range(2):
            assert _guess(person, "BBBB-CCCC").status_code == 200
    assert _guess(browser("acct-1"), codes["user_code"]).status_code == 429
    assert _guess(browser("acct-1"), codes["user_code"], address="203.0.113.9").status_code == 200


def test_the_decision_post_is_limited_too(hand: PersonalAgent, acme_settings: Any) -> None:
    acme_settings.POPPY_AUTHORITY = {
        **acme_settings.POPPY_AUTHORITY,
        "DEVICE_CODE_FAILURES_PER_USER": 2,
    }
    session_id = hand.start_session().json()["session_id"]
    codes = device_codes(hand)
    person = browser("acct-1")
    for code in ("BBBB-CCCC", "CCCC-DDDD"):
        post(person, "/device", {"user_code": code, "decision": "approve"})
    answer = post(
        person,
        "/device",
        {"user_code": codes["user_code"], "decision": "approve", "scope": ["poppy:read"]},
    )
    assert answer.status_code == 429
    assert poll(hand, codes["device_code"], session_id).json()["error"] == "authorization_pending"
