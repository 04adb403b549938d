"""The token and revocation endpoints over HTTP: answers, refusals, hygiene, limits."""

from __future__ import annotations

from typing import Any

import jwt
import pytest

from poppy_django.authority.models import Client, Session
from poppy_django.authority.status import session_is_active
from poppy_django.verifier.principal import Principal
from tests.agents import JWT_BEARER, PersonalAgent
from tests.authority.sdk_agent import DOMAIN, ORIGIN

pytestmark = pytest.mark.django_db


@pytest.fixture
def hand(acme_settings: Any) -> PersonalAgent:
    return PersonalAgent.with_identity()


def test_a_session_starts_signed_out_with_a_dpop_bound_token_never_cached(
    hand: PersonalAgent,
) -> None:
    response = hand.start_session()
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["token_type"] == "DPoP" and body["signed_in"] is False and body["scope"] == ""
    assert body["session_id"].startswith("ses_") and "refresh_token" not in body
    claims = jwt.decode(body["access_token"], options={"verify_signature": False})
    assert claims["iss"] == ORIGIN
    assert claims["aud"] == f"{ORIGIN}/poppy/conversations"
    assert claims["sid"] == body["session_id"]
    assert claims["client_id"] == hand.client_id and claims["signed_in"] is False
    assert "acct" not in claims and "scope" not in claims
    assert claims["exp"] - claims["iat"] == body["expires_in"] == 300


def test_refusals_are_json_no_store_and_never_echo_a_credential(hand: PersonalAgent) -> None:
    assertion = hand.signed(hand.claims("usr_x", aud=f"{ORIGIN}/oauth/token"))
    form = {"grant_type": JWT_BEARER, "assertion": assertion, **hand.client_form()}
    response = hand.post_form("/oauth/token", form, dpop=hand.proof())
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    assert response["Cache-Control"] == "no-store"
    assert assertion not in response.content.decode()
    assert form["client_assertion"] not in response.content.decode()
    assert Session.objects.count() == 0


@pytest.mark.parametrize(
    ("form", "dpop", "status", "error"),
    [
        ({"grant_type": "password"}, True, 400, "unsupported_grant_type"),
        ({"client_assertion": "x.y.z"}, True, 401, "invalid_client"),
        ({"client_id": "http://hand.example/agent.json"}, True, 401, "invalid_client"),
        ({"client_assertion_type": "client_secret_post"}, True, 401, "invalid_client"),
        ({}, False, 400, "invalid_dpop_proof"),
        ({"assertion": ""}, True, 400, "invalid_grant"),
        ({"session_id": "ses_unknown"}, True, 400, "invalid_session"),
    ],
)
def test_each_broken_token_request_is_refused_with_its_oauth_error(
    hand: PersonalAgent, form: dict[str, str], dpop: bool, status: int, error: str
) -> None:
    body = {
        "grant_type": JWT_BEARER,
        "assertion": hand.signed(hand.claims("usr_y")),
        **hand.client_form(),
        **form,
    }
    response = hand.post_form("/oauth/token", body, dpop=hand.proof() if dpop else None)
    assert (response.status_code, response.json()["error"]) == (status, error)
    assert Session.objects.count() == 0


def test_a_proof_for_another_url_or_method_or_a_replayed_one_is_refused(
    hand: PersonalAgent,
) -> None:
    for proof in (
        hand.proof(url=f"{ORIGIN}/oauth/revoke"),
        hand.proof(method="GET"),
        hand.proof(iat=1),
    ):
        body = {"grant_type": JWT_BEARER, "assertion": hand.signed(hand.claims("usr_z"))}
        response = hand.post_form("/oauth/token", {**body, **hand.client_form()}, dpop=proof)
        assert response.json()["error"] == "invalid_dpop_proof"
    proof = hand.proof()
    first = hand.post_form(
        "/oauth/token",
        {
            "grant_type": JWT_BEARER,
            "assertion": hand.signed(hand.claims("usr_z")),
            **hand.client_form(),
        },
        dpop=proof,
    )
    again = hand.post_form(
        "/oauth/token",
        {
            "grant_type": JWT_BEARER,
            "assertion": hand.signed(hand.claims("usr_z")),
            **hand.client_form(),
        },
        dpop=proof,
    )
    assert first.status_code == 200 and again.json()["error"] == "invalid_dpop_proof"


def test_only_a_form_body_by_post(hand: PersonalAgent) -> None:
    response = hand.client.get("/oauth/token", secure=True, HTTP_HOST=DOMAIN)
    assert response.status_code == 405 and response["Allow"] == "POST"
    assert response.json()["error"] == "method_not_allowed"
    response = hand.client.post(
        "/oauth/token", data="{}", content_type="application/json", secure=True, HTTP_HOST=DOMAIN
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_request"


def test_credentials_in_the_query_string_are_ignored(hand: PersonalAgent) -> None:
    query = "grant_type=" + JWT_BEARER + "&assertion=" + hand.signed(hand.claims("usr_q"))
    response = hand.post_form(f"/oauth/token?{query}", hand.client_form(), dpop=hand.proof())
    assert response.status_code == 400 and response.json()["error"] == "unsupported_grant_type"


def test_session_creation_is_limited_per_client(hand: PersonalAgent, acme_settings: Any) -> None:
    acme_settings.POPPY_AUTHORITY = {
        **acme_settings.POPPY_AUTHORITY,
        "SESSIONS_PER_CLIENT_PER_MINUTE": 2,
    }
    assert hand.start_session().status_code == 200
    assert hand.start_session().status_code == 200
    refused = hand.start_session()
    assert refused.status_code == 429 and refused["Retry-After"] == "60"
    assert refused.json()["error"] == "too_many_requests"
    assert Session.objects.count() == 2


def test_revoking_a_session_token_ends_its_session_for_the_status_seam(hand: PersonalAgent) -> None:
    body = hand.start_session().json()
    principal = Principal(
        client_id=hand.client_id, user_id="usr_hand_000000000000001", session_id=body["session_id"]
    )
    assert session_is_active(principal)
    response = hand.post_form(
        "/oauth/revoke", {"token": body["access_token"], **hand.client_form()}
    )
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    assert not session_is_active(principal)
    assert Session.objects.get().ended_at is not None
    # An unknown token is answered alike (RFC 7009 §2.2); a renewal of the ended one is not.
    assert (
        hand.post_form("/oauth/revoke", {"token": "nope", **hand.client_form()}).status_code == 200
    )
    renewal = hand.start_session(session_id=body["session_id"])
    assert renewal.json()["error"] == "invalid_session"


def test_revocation_needs_client_authentication(hand: PersonalAgent) -> None:
    body = hand.start_session().json()
    response = hand.post_form("/oauth/revoke", {"token": body["access_token"]})
    assert response.status_code == 401 and response.json()["error"] == "invalid_client"
    assert Session.objects.get().ended_at is None


def test_a_session_of_another_authority_stays_active_and_a_blocked_client_does_not() -> None:
    stranger = Principal(client_id="https://a.example/c", user_id="u", session_id="ses_dev")
    assert session_is_active(stranger)
    client = Client.objects.create(client_id="https://a.example/c")
    Session.objects.create(session_id="ses_dev", client=client, user_id="u", jkt="k")
    assert session_is_active(stranger)
    client.status = Client.Status.BLOCKED
    client.save()
    assert not session_is_active(stranger)


def test_metadata_and_poppy_json_agree(hand: PersonalAgent) -> None:
    metadata = hand.client.get(
        "/.well-known/oauth-authorization-server", secure=True, HTTP_HOST=DOMAIN
    ).json()
    document = hand.client.get("/.well-known/poppy.json", secure=True, HTTP_HOST=DOMAIN).json()
    assert metadata["issuer"] == document["auth"]["issuer"] == ORIGIN
    assert document["organization"]["domain"] in metadata["poppy_domains"]
    # The example's own scope (its orders API) is offered beside the protocol's two.
    assert document["auth"]["device"] == {"scopes": ["poppy:read", "poppy:write", "orders:read"]}
    assert metadata["device_authorization_endpoint"] == f"{ORIGIN}/oauth/device_authorization"
    keys = hand.client.get("/oauth/jwks.json", secure=True, HTTP_HOST=DOMAIN).json()["keys"]
    assert [key["alg"] for key in keys] == ["ES256"] and "d" not in keys[0]


def test_a_signed_in_token_is_inactive_once_its_sign_in_is_revoked() -> None:
    from poppy_django.authority.grants import revoke_grants
    from poppy_django.authority.models import Grant

    client = Client.objects.create(client_id="https://a.example/c")
    grant = Grant.objects.create(client=client, user_id="u", account_id="acct-1", method="device")
    Session.objects.create(
        session_id="ses_in", client=client, user_id="u", jkt="k", account_id="acct-1", grant=grant
    )
    signed_in = Principal(
        client_id=client.client_id,
        user_id="u",
        session_id="ses_in",
        signed_in=True,
        account_id="acct-1",
    )
    signed_out = Principal(client_id=client.client_id, user_id="u", session_id="ses_in")
    assert session_is_active(signed_in) and session_is_active(signed_out)
    assert not session_is_active(
        Principal(client_id="https://b.example/c", user_id="u", session_id="ses_in")
    )
    revoke_grants(Grant.objects.all())
    assert session_is_active(signed_in) == "signed_out"  # handled as signed out from now on
    assert session_is_active(signed_out) is True  # the Session continues, signed out


def test_server_nonces_when_the_verifier_requires_them(
    hand: PersonalAgent, acme_settings: Any
) -> None:
    acme_settings.POPPY = {
        **acme_settings.POPPY,
        "TOKENS": {**acme_settings.POPPY["TOKENS"], "REQUIRE_NONCE": True},
    }
    asked = hand.start_session()
    assert asked.status_code == 400 and asked.json()["error"] == "use_dpop_nonce"
    nonce = asked["DPoP-Nonce"]
    body = {
        "grant_type": JWT_BEARER,
        "assertion": hand.signed(hand.claims("usr_nonce")),
        **hand.client_form(),
    }
    answered = hand.post_form("/oauth/token", body, dpop=hand.proof(nonce=nonce))
    assert answered.status_code == 200
