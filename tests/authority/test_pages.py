"""The User's pages and the admin: Device Sign-In consent, disconnect, staff actions."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client as Browser

from poppy_django.authority.models import AccountToken, Client, DeviceAuthorization, Grant, Session
from tests.agents import PersonalAgent
from tests.authority.driver import PASSWORD
from tests.authority.sdk_agent import DOMAIN

pytestmark = pytest.mark.django_db

DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"


@pytest.fixture
def hand(acme_settings: Any, customers: None) -> PersonalAgent:
    return PersonalAgent.with_identity()


def browser(account: str) -> Browser:
    person = Browser()
    assert person.login(username=account, password=PASSWORD)
    return person


def get(person: Browser, path: str) -> Any:
    return person.get(path, secure=True, HTTP_HOST=DOMAIN)


def post(person: Browser, path: str, data: dict[str, Any]) -> Any:
    return person.post(path, data, secure=True, HTTP_HOST=DOMAIN)


def device_codes(hand: PersonalAgent, scope: str = "poppy:read poppy:write") -> dict[str, Any]:
    response = hand.post_form("/oauth/device_authorization", {"scope": scope, **hand.client_form()})
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    return response.json()


def poll(hand: PersonalAgent, device_code: str, session_id: str) -> Any:
    form = {
        "grant_type": DEVICE_CODE,
        "device_code": device_code,
        "session_id": session_id,
        **hand.client_form(),
    }
    return hand.post_form("/oauth/token", form, dpop=hand.proof())


def test_the_device_page_asks_to_log_in_first(hand: PersonalAgent) -> None:
    codes = device_codes(hand)
    response = Browser().get(
        codes["verification_uri_complete"].removeprefix(f"https://{DOMAIN}"),
        secure=True,
        HTTP_HOST=DOMAIN,
    )
    assert response.status_code == 302 and response["Location"].startswith("/account/login")
    assert codes["verification_uri"] == f"https://{DOMAIN}/device"


def test_the_login_page_names_the_company_as_the_consent_page_does(hand: PersonalAgent) -> None:
    """It said "Your account" where the consent page says "your Acme Outfitters account"."""
    page = Browser().get("/account/login", secure=True, HTTP_HOST=DOMAIN).content.decode()
    assert "<strong>Acme Outfitters</strong>" in page and "Your account" not in page
    assert "<h1>Log in to your Acme Outfitters account</h1>" in page
    person = browser("acct-1")
    consent = get(person, f"/device?user_code={device_codes(hand)['user_code']}")
    assert "use your Acme Outfitters account?" in consent.content.decode()


def test_partial_consent_grants_only_what_the_user_chose(hand: PersonalAgent) -> None:
    session_id = hand.start_session().json()["session_id"]
    codes = device_codes(hand)
    assert poll(hand, codes["device_code"], session_id).json()["error"] == "authorization_pending"
    person = browser("acct-2")
    consent = get(person, f"/device?user_code={codes['user_code'].lower().replace('-', '')}")
    assert consent.status_code == 200 and "poppy:write" in consent.content.decode()
    done = post(
        person,
        "/device",
        {
            "user_code": codes["user_code"],
            "decision": "approve",
            "scope": ["poppy:read", "admin:all"],
        },
    )
    assert "is connected" in done.content.decode()
    body = poll(hand, codes["device_code"], session_id).json()
    assert body["signed_in"] is True and body["scope"] == "poppy:read"
    assert body["session_id"] == session_id and body["refresh_token"]
    # The Account Token is kept only as a hash; the device code works once.
    assert not AccountToken.objects.filter(token_hash=body["refresh_token"]).exists()
    assert poll(hand, codes["device_code"], session_id).json()["error"] == "invalid_grant"
    grant = Grant.objects.get()
    assert (grant.account_id, grant.scope, grant.method) == ("acct-2", "poppy:read", "device")


def test_a_denied_sign_in_is_access_denied_and_an_unknown_code_is_said(hand: PersonalAgent) -> None:
    session_id = hand.start_session().json()["session_id"]
    codes = device_codes(hand)
    person = browser("acct-1")
    assert "unknown or has expired" in get(person, "/device?user_code=BBBB-CCCC").content.decode()
    post(person, "/device", {"user_code": codes["user_code"], "decision": "deny"})
    assert poll(hand, codes["device_code"], session_id).json()["error"] == "access_denied"
    assert Session.objects.get().grant is None


def test_an_unknown_scope_is_refused_at_the_start(hand: PersonalAgent) -> None:
    response = hand.post_form(
        "/oauth/device_authorization", {"scope": "root", **hand.client_form()}
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_scope"
    assert not DeviceAuthorization.objects.exists()


def test_polling_too_fast_is_slow_down(hand: PersonalAgent, acme_settings: Any) -> None:
    acme_settings.POPPY_AUTHORITY = {**acme_settings.POPPY_AUTHORITY, "DEVICE_INTERVAL_SECONDS": 30}
    session_id = hand.start_session().json()["session_id"]
    codes = device_codes(hand)
    assert poll(hand, codes["device_code"], session_id).json()["error"] == "authorization_pending"
    assert poll(hand, codes["device_code"], session_id).json()["error"] == "slow_down"


def signed_in(hand: PersonalAgent, account: str = "acct-1") -> tuple[str, str]:
    session_id = hand.start_session().json()["session_id"]
    codes = device_codes(hand)
    post(
        browser(account),
        "/device",
        {
            "user_code": codes["user_code"],
            "decision": "approve",
            "scope": ["poppy:read", "poppy:write"],
        },
    )
    body = poll(hand, codes["device_code"], session_id).json()
    return session_id, body["refresh_token"]


def test_disconnect_this_agent_from_the_account_settings_page(hand: PersonalAgent) -> None:
    session_id, account_token = signed_in(hand)
    person = browser("acct-1")
    page = get(person, "/account/agents")
    assert hand.client_id in page.content.decode()
    assert hand.client_id not in get(browser("acct-2"), "/account/agents").content.decode()
    done = post(person, "/account/agents", {"client_id": hand.client_id})
    assert done.status_code == 302
    session = Session.objects.get(session_id=session_id)
    assert session.grant is None and session.scope == "" and session.ended_at is None
    refresh = {
        "grant_type": "refresh_token",
        "refresh_token": account_token,
        "session_id": session_id,
    }
    answer = hand.post_form("/oauth/token", {**refresh, **hand.client_form()}, dpop=hand.proof())
    assert answer.json()["error"] == "invalid_grant"
    assert "No personal agent is connected" in get(person, "/account/agents").content.decode()


def test_the_connections_page_needs_a_login_and_csrf(hand: PersonalAgent) -> None:
    assert Browser().get("/account/agents", secure=True, HTTP_HOST=DOMAIN).status_code == 302
    signed_in(hand)
    strict = Browser(enforce_csrf_checks=True)
    strict.login(username="acct-1", password=PASSWORD)
    assert post(strict, "/account/agents", {"client_id": hand.client_id}).status_code == 403
    assert Grant.objects.get().revoked_at is None


def test_staff_disconnect_and_block_from_the_admin(
    hand: PersonalAgent, admin_client: Browser
) -> None:
    session_id, _ = signed_in(hand)
    grant = Grant.objects.get()
    response = admin_client.post(
        "/admin/poppy_authority/grant/",
        {"action": "disconnect", "_selected_action": [grant.pk]},
        secure=True,
        HTTP_HOST=DOMAIN,
    )
    assert response.status_code == 302
    assert Grant.objects.get().revoked_at is not None
    assert Session.objects.get(session_id=session_id).grant is None
    client = Client.objects.get()
    admin_client.post(
        "/admin/poppy_authority/client/",
        {"action": "block", "_selected_action": [client.pk]},
        secure=True,
        HTTP_HOST=DOMAIN,
    )
    assert Client.objects.get().status == "blocked"
    assert Session.objects.get(session_id=session_id).ended_at is not None
    for page in ("client", "session", "grant"):
        assert (
            admin_client.get(
                f"/admin/poppy_authority/{page}/", secure=True, HTTP_HOST=DOMAIN
            ).status_code
            == 200
        )


def authorize_query(hand: PersonalAgent, verifier: str, **overrides: str) -> str:
    from urllib.parse import urlencode

    from authlib.oauth2.rfc7636 import create_s256_code_challenge

    params = {
        "response_type": "code",
        "client_id": hand.client_id,
        "redirect_uri": hand.identity.metadata["redirect_uris"][0],
        "scope": "poppy:read poppy:write",
        "state": "st4te",
        "code_challenge": create_s256_code_challenge(verifier),
        "code_challenge_method": "S256",
        **overrides,
    }
    return "/oauth/authorize?" + urlencode(params)


def test_direct_sign_in_refuses_an_unregistered_redirect_without_redirecting(
    hand: PersonalAgent,
) -> None:
    person = browser("acct-1")
    page = get(person, authorize_query(hand, "v" * 43, redirect_uri="https://evil.example/cb"))
    assert page.status_code == 400 and "not valid" in page.content.decode()
    page = get(person, authorize_query(hand, "v" * 43, client_id="https://nowhere.example/a"))
    assert page.status_code == 400


def test_direct_sign_in_code_needs_its_pkce_verifier_and_works_once(hand: PersonalAgent) -> None:
    session_id = hand.start_session().json()["session_id"]
    verifier = "k" * 50
    person = browser("acct-1")
    query = authorize_query(hand, verifier)
    assert get(person, query).status_code == 200
    answer = post(person, query, {"decision": "approve", "scope": ["poppy:read"]})
    location = answer["Location"]
    assert location.startswith("https://hand.example/oauth/callback?")
    assert "state=st4te" in location and "iss=https%3A%2F%2Facme.example" in location
    code = location.split("code=", 1)[1].split("&", 1)[0]
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": hand.identity.metadata["redirect_uris"][0],
        "session_id": session_id,
    }
    wrong = hand.post_form(
        "/oauth/token", {**form, "code_verifier": "x" * 50, **hand.client_form()}, dpop=hand.proof()
    )
    assert wrong.json()["error"] == "invalid_grant"
    right = hand.post_form(
        "/oauth/token", {**form, "code_verifier": verifier, **hand.client_form()}, dpop=hand.proof()
    )
    assert right.status_code == 200 and right.json()["scope"] == "poppy:read"
    again = hand.post_form(
        "/oauth/token", {**form, "code_verifier": verifier, **hand.client_form()}, dpop=hand.proof()
    )
    assert again.json()["error"] == "invalid_grant"


def test_direct_sign_in_denied_or_unknown_scope_goes_back_with_the_error(
    hand: PersonalAgent,
) -> None:
    person = browser("acct-1")
    query = authorize_query(hand, "d" * 43)
    denied = post(person, query, {"decision": "deny"})
    assert "error=access_denied" in denied["Location"] and "state=st4te" in denied["Location"]
    unknown = get(person, authorize_query(hand, "d" * 43, scope="root"))
    assert unknown.status_code == 302 and "error=invalid_scope" in unknown["Location"]
