"""The DRF authentication class: same verifier, request.user/auth, refusals with challenges."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from poppy_django.api.permissions import HasPoppyScope
from poppy_django.client import DPoPKey
from poppy_django.verifier import dpop
from tests.auth.conftest import dpop_poppy
from tests.auth.support import BASE_URL, NOW, Issuer, proof

pytestmark = pytest.mark.urls("tests.auth.urls")
URL = BASE_URL + "/api/whoami"


@pytest.fixture
def pinned(settings: Any, issuer: Issuer) -> Issuer:
    dpop_poppy(settings, issuer)
    dpop.reset()
    dpop.get_verifier().clock = lambda: NOW
    return issuer


def get(token: str | None, signed: str | None, scheme: str = "DPoP") -> Any:
    headers = {}
    if token:
        headers["HTTP_AUTHORIZATION"] = f"{scheme} {token}"
    if signed:
        headers["HTTP_DPOP"] = signed
    return Client().get("/api/whoami", **headers)


def test_authenticated(pinned: Issuer, pa_key: DPoPKey) -> None:
    token = pinned.token(jkt=pa_key.thumbprint, now=NOW, account="acct-1")
    response = get(token, proof(pa_key, "GET", URL, token, now=NOW))
    assert response.status_code == 200, response.content
    assert response.json() == {
        "user": "acct-1",
        "client_id": "https://pa.example/client",
        "user_id": "user-1",
        "signed_in": True,
    }


def test_refusal_keeps_code_status_and_challenge(pinned: Issuer, pa_key: DPoPKey) -> None:
    token = pinned.token(jkt=pa_key.thumbprint, now=NOW)
    response = get(token, proof(pa_key, "POST", URL, token, now=NOW))
    assert response.status_code == 401
    assert response.json() == {
        "error": "invalid_dpop_proof",
        "error_description": dpop.DESCRIPTIONS["invalid_dpop_proof"],
    }
    assert (
        response["WWW-Authenticate"] == 'DPoP error="invalid_dpop_proof", algs="ES256 RS256 EdDSA"'
    )
    assert response["Cache-Control"] == "no-store"


@pytest.mark.parametrize(
    ("scheme", "challenge"),
    [
        # No credentials: the DPoP challenge without an error (RFC 6750 section 3.1).
        (None, 'DPoP algs="ES256 RS256 EdDSA"'),
        # A Session Token sent as Bearer: refused by the verifier, as the endpoint does.
        ("Bearer", 'DPoP error="invalid_token", algs="ES256 RS256 EdDSA"'),
    ],
)
def test_no_dpop_credentials_is_401_invalid_token_with_challenge(
    pinned: Issuer, pa_key: DPoPKey, scheme: str | None, challenge: str
) -> None:
    token = pinned.token(jkt=pa_key.thumbprint, now=NOW)
    response = get(token if scheme else None, None, scheme=scheme or "DPoP")
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_token"
    assert response["WWW-Authenticate"] == challenge
    assert response["Cache-Control"] == "no-store"


def test_scope_refusal_is_403_and_nonce_is_sent(
    settings: Any, issuer: Issuer, pa_key: DPoPKey
) -> None:
    dpop_poppy(settings, issuer, REQUIRED_SCOPE="poppy:read", REQUIRE_NONCE=True)
    dpop.reset()
    dpop.get_verifier().clock = lambda: NOW
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW, account="a1")
    response = get(token, proof(pa_key, "GET", URL, token, now=NOW))
    assert response.status_code == 401 and response.json()["error"] == "use_dpop_nonce"
    nonce = response["DPoP-Nonce"]
    response = get(token, proof(pa_key, "GET", URL, token, now=NOW, nonce=nonce))
    assert response.status_code == 403 and response.json()["error"] == "insufficient_scope"
    assert response["WWW-Authenticate"].startswith(
        'DPoP error="insufficient_scope", scope="poppy:read"'
    )
    dpop.reset()


# A company's own API: the example project's orders, over HTTP with real DPoP tokens.

ORDERS_URL = BASE_URL + "/api/orders"


def get_orders(issuer: Issuer, key: DPoPKey, path: str = "", **claims: Any) -> Any:
    url = ORDERS_URL + path
    token = issuer.token(jkt=key.thumbprint, now=NOW, **claims)
    return Client().get(
        "/api/orders" + path,
        HTTP_AUTHORIZATION=f"DPoP {token}",
        HTTP_DPOP=proof(key, "GET", url, token, now=NOW),
    )


@pytest.mark.urls("example_project.urls")
@pytest.mark.django_db
def test_orders_api_answers_the_signed_in_account_with_the_scope(
    pinned: Issuer, pa_key: DPoPKey, shop_orders: None
) -> None:
    response = get_orders(pinned, pa_key, account="acct-1", scope="orders:read")
    assert response.status_code == 200, response.content
    assert [order["id"] for order in response.json()] == ["A-1", "A-2"]
    one = get_orders(pinned, pa_key, "/A-2", account="acct-1", scope="orders:read")
    assert one.json() == {"id": "A-2", "item": one.json()["item"], "status": "processing"}
    # Another account's order is not found.
    other = get_orders(pinned, pa_key, "/B-1", account="acct-1", scope="orders:read")
    assert other.status_code == 404


@pytest.mark.urls("example_project.urls")
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("claims", "error", "challenge"),
    [
        (
            {"account": "acct-1", "scope": "poppy:read"},
            "insufficient_scope",
            'DPoP error="insufficient_scope", scope="orders:read"',
        ),
        ({"scope": "orders:read"}, "sign_in_required", 'DPoP error="sign_in_required"'),
    ],
)
def test_orders_api_refuses_without_the_scope_or_signed_out(
    pinned: Issuer, pa_key: DPoPKey, claims: dict, error: str, challenge: str
) -> None:
    response = get_orders(pinned, pa_key, **claims)
    assert response.status_code == 403
    assert response.json()["error"] == error
    assert response["WWW-Authenticate"] == challenge


@pytest.mark.urls("example_project.urls")
@pytest.mark.django_db
def test_orders_api_without_a_token_is_401_with_a_dpop_challenge(pinned: Issuer) -> None:
    response = Client().get("/api/orders")
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_token"
    assert response["WWW-Authenticate"].startswith("DPoP")
    assert response["Cache-Control"] == "no-store"


@pytest.mark.urls("example_project.urls")
@pytest.mark.django_db
def test_orders_api_answers_a_session_token_sent_as_bearer_as_the_endpoint_does(
    pinned: Issuer, pa_key: DPoPKey
) -> None:
    """Issue 23 gap 2 (``security.dpop-token-as-bearer``): same code, challenge, no-store."""
    token = pinned.token(jkt=pa_key.thumbprint, now=NOW, account="acct-1", scope="orders:read")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    api = Client().get("/api/orders", **headers)
    endpoint = Client().post("/poppy/conversations", b"{}", "application/json", **headers)
    for response in (api, endpoint):
        assert response.status_code == 401
        assert response.json()["error"] == "invalid_token"
        assert response["WWW-Authenticate"] == (
            'DPoP error="invalid_token", algs="ES256 RS256 EdDSA"'
        )
        assert response["Cache-Control"] == "no-store"
    assert api.json() == endpoint.json()


@pytest.mark.urls("example_project.urls")
def test_poppy_json_lists_the_apis_that_accept_session_tokens(pinned: Issuer) -> None:
    document = Client().get("/.well-known/poppy.json").json()
    openapi, mcp = document["apis"]
    assert (openapi["type"], openapi["url"]) == ("openapi", BASE_URL + "/api/schema")
    assert openapi["description"]  # personal agents refuse an entry without one
    # The example's MCP server of the Company Agent's tools (docs/mcp.md).
    assert mcp == {
        "type": "mcp",
        "url": BASE_URL + "/poppy/mcp",
        "resource": BASE_URL + "/poppy/mcp",
        "description": "The Company Agent's tools over MCP (Streamable HTTP).",
    }
    schema = Client().get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    orders = schema["paths"]["/api/orders"]["get"]
    assert orders["security"] == [{"PoppySessionToken": []}]
    assert "/poppy/conversations" in schema["paths"]


def test_has_poppy_scope_needs_a_scope() -> None:
    with pytest.raises(TypeError):
        HasPoppyScope()
