"""The catalogue over HTTP: the example project's endpoint with the DPoP verifier.

Every forged or broken request is answered with its status, the wire's JSON error body, its
``WWW-Authenticate`` challenge and ``Cache-Control: no-store`` — and writes nothing. The
configured verifier's clock is pinned to ``NOW`` so no case depends on the wall clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from poppy_django.client import DPoPKey
from poppy_django.engine.executors import ThreadExecutor
from poppy_django.models import ActionRecord, AgentThread, Conversation, Event, MessageReceipt
from poppy_django.verifier import dpop
from tests.auth.conftest import dpop_poppy
from tests.auth.support import ENDPOINT_URL, NOW, Issuer, proof
from tests.auth.test_verifier import PROOF_CASES, TOKEN_CASES

# Views write through threads with their own connections: tests where a request is accepted
# commit for real and are flushed after (``writes``); refusals alone need no flush.
pytestmark = pytest.mark.django_db
writes = pytest.mark.django_db(transaction=True)
PATH = "/poppy/conversations"


@pytest.fixture
def pinned(settings: Any, issuer: Issuer) -> Iterator[Issuer]:
    dpop_poppy(settings, issuer)
    dpop.reset()
    dpop.get_verifier().clock = lambda: NOW
    yield issuer
    dpop.reset()


def rows() -> dict[str, int]:
    """Durable rows once no turn is in flight (a turn started by an accepted request writes)."""
    ThreadExecutor.shutdown(wait=True)
    return {
        "conversations": Conversation.objects.count(),
        "events": Event.objects.count(),
        "receipts": MessageReceipt.objects.count(),
        "threads": AgentThread.objects.count(),
        "actions": ActionRecord.objects.count(),
    }


def body(message_id: str = "m1") -> str:
    return json.dumps({"message": {"id": message_id, "sender": "agent", "text": "hello"}})


def post(token: str | None, signed: str | None, *, scheme: str = "DPoP", path: str = PATH) -> Any:
    headers: dict[str, str] = {}
    if token is not None:
        headers["HTTP_AUTHORIZATION"] = f"{scheme} {token}"
    if signed:
        headers["HTTP_DPOP"] = signed
    return Client().post(path, data=body(), content_type="application/json", **headers)


#: What a proof for another URL is told: the URL this server expected (a wrong BASE_URL).
HTU_REFUSAL = (
    f"htu does not match the URL: this server expected {ENDPOINT_URL} (its public URL: "
    'POPPY["BASE_URL"], else the request\'s host and scheme)'
)


def assert_refused(
    response: Any, status: int, code: str, *, description: str | None = None
) -> None:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error", "error_description"} and body["error"] == code
    if description is not None:
        assert body["error_description"] == description
    elif code == "invalid_token":  # which claim failed and why
        assert body["error_description"] not in ("", dpop.DESCRIPTIONS[code])
    else:
        assert body["error_description"] == dpop.DESCRIPTIONS[code]
    assert response["WWW-Authenticate"].startswith(f'DPoP error="{code}"')
    assert 'algs="ES256 RS256 EdDSA"' in response["WWW-Authenticate"]
    assert response["Cache-Control"] == "no-store"


@pytest.mark.filterwarnings("ignore:The RSA key is 1024 bits")
@pytest.mark.parametrize("case", sorted(PROOF_CASES))
def test_broken_proof_over_http(case: str, pinned: Issuer, pa_key: DPoPKey) -> None:
    before = rows()
    token = pinned.token(jkt=pa_key.thumbprint, now=NOW)
    token, signed = PROOF_CASES[case](pinned, pa_key, token)
    told = HTU_REFUSAL if case.startswith("wrong htu") or case == "no htu" else None
    assert_refused(post(token, signed), 401, "invalid_dpop_proof", description=told)
    assert rows() == before


@pytest.mark.parametrize("case", sorted(TOKEN_CASES))
def test_broken_token_over_http(case: str, pinned: Issuer, pa_key: DPoPKey) -> None:
    before = rows()
    token = TOKEN_CASES[case](pinned, pa_key)
    assert_refused(
        post(token, proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW)), 401, "invalid_token"
    )
    assert rows() == before


@writes
def test_bearer_token_over_http(pinned: Issuer, pa_key: DPoPKey) -> None:
    token = pinned.token(jkt=pa_key.thumbprint, now=NOW)
    response = post(token, proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW), scheme="Bearer")
    assert_refused(response, 401, "invalid_token")
    assert rows()["conversations"] == 0


@writes
def test_accepted_then_replay_refused(pinned: Issuer, pa_key: DPoPKey) -> None:
    token = pinned.token(jkt=pa_key.thumbprint, now=NOW, account="acct-1", scope="poppy:read")
    signed = proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW)
    response = post(token, signed)
    assert response.status_code == 201, response.content
    conversation = Conversation.objects.get()
    assert (
        conversation.client_id == "https://pa.example/client" and conversation.user_id == "user-1"
    )
    assert conversation.account_id == "acct-1"
    before = rows()
    assert_refused(post(token, signed), 401, "invalid_dpop_proof")
    assert rows() == before


@writes
def test_proof_for_another_route_is_refused(pinned: Issuer, pa_key: DPoPKey) -> None:
    token = pinned.token(jkt=pa_key.thumbprint, now=NOW)
    response = post(token, proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW))
    conversation_id = response.json()["conversation_id"]
    before = rows()
    # A proof for the start URL replayed against the messages URL of that conversation.
    signed = proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW)
    response = post(token, signed, path=f"{PATH}/{conversation_id}/messages")
    expected = HTU_REFUSAL.replace(ENDPOINT_URL, f"{ENDPOINT_URL}/{conversation_id}/messages")
    assert_refused(response, 401, "invalid_dpop_proof", description=expected)
    assert rows() == before


@writes
def test_nonce_required_over_http(settings: Any, issuer: Issuer, pa_key: DPoPKey) -> None:
    dpop_poppy(settings, issuer, REQUIRE_NONCE=True)
    dpop.reset()
    dpop.get_verifier().clock = lambda: NOW
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    response = post(token, proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW))
    assert_refused(response, 401, "use_dpop_nonce")
    nonce = response["DPoP-Nonce"]
    assert rows()["conversations"] == 0
    response = post(token, proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW, nonce=nonce))
    assert response.status_code == 201, response.content
    dpop.reset()


@writes
def test_required_scope_over_http(settings: Any, issuer: Issuer, pa_key: DPoPKey) -> None:
    dpop_poppy(settings, issuer, REQUIRED_SCOPE="poppy:read")
    dpop.reset()
    dpop.get_verifier().clock = lambda: NOW
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    assert_refused(
        post(token, proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW)), 403, "sign_in_required"
    )
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW, account="a1", scope="other")
    response = post(token, proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW))
    assert_refused(response, 403, "insufficient_scope")
    assert 'scope="poppy:read"' in response["WWW-Authenticate"]
    assert rows()["conversations"] == 0
    dpop.reset()


@writes
def test_public_url_from_the_request_when_no_base_url(
    settings: Any, issuer: Issuer, pa_key: DPoPKey
) -> None:
    """Without BASE_URL, htu and aud name the request's own host (https issuer: https)."""
    dpop_poppy(settings, issuer)
    settings.POPPY = {**settings.POPPY, "BASE_URL": None}
    dpop.reset()
    dpop.get_verifier().clock = lambda: NOW
    url = "https://localhost/poppy/conversations"
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW, aud=url)
    response = Client().post(
        PATH,
        data=body(),
        content_type="application/json",
        HTTP_HOST="localhost",
        HTTP_AUTHORIZATION=f"DPoP {token}",
        HTTP_DPOP=proof(pa_key, "POST", url, token, now=NOW),
    )
    assert response.status_code == 201, response.content
    dpop.reset()
