"""The DRF authentication class: same verifier, request.user/auth, refusals with challenges."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from poppy_django.auth import dpop
from poppy_django.client import DPoPKey
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


@pytest.mark.parametrize("scheme", [None, "Bearer"])
def test_no_dpop_credentials_is_401_with_challenge(
    pinned: Issuer, pa_key: DPoPKey, scheme: str | None
) -> None:
    token = pinned.token(jkt=pa_key.thumbprint, now=NOW)
    response = get(token if scheme else None, None, scheme=scheme or "DPoP")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'DPoP algs="ES256 RS256 EdDSA"'


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
