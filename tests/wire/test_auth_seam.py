"""The verifier seam: 501 without one, refusals answered as the verifier says, auth first."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client, override_settings

from poppy_django.verifier import AuthRefusal, Principal
from tests.agents import PersonalAgent
from tests.wire.wire_support import assert_error, poppy, quiet_start, rows

pytestmark = pytest.mark.django_db(transaction=True)

#: What the test verifier saw, and what it answers next (None: a principal).
SEEN: list[dict[str, Any]] = []
ANSWER: dict[str, Any] = {}

HERE = "tests.wire.test_auth_seam"


def verifier(request: dict[str, Any]) -> Principal | AuthRefusal:
    """A tiny verifier: records the request, then refuses (raised or returned) or admits."""
    SEEN.append(request)
    if ANSWER.get("crash"):
        raise RuntimeError("the verifier broke")
    refusal = ANSWER.get("refusal")
    if refusal is not None:
        if ANSWER.get("return_it"):
            return refusal
        raise refusal
    return Principal(client_id="https://pa.example/seam", user_id="seam-user")


@pytest.fixture
def seam():
    SEEN.clear()
    ANSWER.clear()
    with poppy(AUTHENTICATE=f"{HERE}.verifier"):
        yield
    SEEN.clear()
    ANSWER.clear()


def every_route(agent: PersonalAgent, conversation_id: str, body: Any = None) -> list[Any]:
    message = body or {"message": {"id": "seam-1", "sender": "agent", "text": "hi"}}
    return [
        agent.post("", message),
        agent.post(f"/{conversation_id}/messages", message),
        agent.get(f"/{conversation_id}/events"),
        agent.get(f"/{conversation_id}/events", HTTP_ACCEPT="text/event-stream"),
        agent.post(f"/{conversation_id}/handoff"),
        agent.post(f"/{conversation_id}/close"),
    ]


def test_no_verifier_is_501_not_implemented_on_every_route(agent):
    conversation_id = quiet_start(agent)
    before = rows()
    with poppy(AUTHENTICATE=None):
        for response in every_route(agent, conversation_id):
            assert_error(response, 501, "not_implemented")
    assert rows() == before


@pytest.mark.parametrize("return_it", [False, True], ids=["raised", "returned"])
def test_a_refusal_is_answered_with_its_status_headers_and_description(seam, return_it):
    ANSWER["refusal"] = AuthRefusal(
        "use_dpop_nonce",
        "Use the server's nonce.",
        www_authenticate='DPoP error="use_dpop_nonce", algs="ES256"',
        headers={"DPoP-Nonce": "nonce-123"},
    )
    ANSWER["return_it"] = return_it
    agent = PersonalAgent()
    before = rows()
    for response in every_route(agent, "cnv_whatever"):
        body = assert_error(response, 401, "use_dpop_nonce")
        assert body["error_description"] == "Use the server's nonce."
        assert response["WWW-Authenticate"] == 'DPoP error="use_dpop_nonce", algs="ES256"'
        assert response["DPoP-Nonce"] == "nonce-123"
        assert response["Cache-Control"] == "no-store"
    assert rows() == before


@pytest.mark.parametrize(
    ("error", "status"),
    [
        ("invalid_token", 401),
        ("invalid_dpop_proof", 401),
        ("sign_in_required", 403),
        ("insufficient_scope", 403),
    ],
)
def test_each_refusal_has_its_status_and_default_challenge(seam, error, status):
    ANSWER["refusal"] = AuthRefusal(error, f"refused: {error}")
    response = PersonalAgent().post("", {"message": {"id": "x", "sender": "agent", "text": "t"}})
    body = assert_error(response, status, error)
    assert body["error_description"] == f"refused: {error}"
    assert response["WWW-Authenticate"] == f'DPoP error="{error}"'


def test_auth_happens_before_the_body_is_read(seam):
    ANSWER["refusal"] = AuthRefusal("invalid_token", "expired")
    agent = PersonalAgent()
    before = rows()
    with poppy(AUTHENTICATE=f"{HERE}.verifier", MAX_BODY_BYTES=64):
        oversized = b'{"message": {"id": "a", "sender": "agent", "text": "' + b"x" * 500 + b'"}}'
        for raw in (oversized, b"{not json", b"[]"):
            for path in ("", "/cnv_unknown/messages", "/cnv_unknown/handoff", "/cnv_unknown/close"):
                assert_error(agent.post(path, raw=raw), 401, "invalid_token")
    assert rows() == before


def test_auth_happens_before_the_path_id_is_checked(seam):
    ANSWER["refusal"] = AuthRefusal("invalid_token", "expired")
    agent = PersonalAgent()
    for response in every_route(agent, "not.a.valid.id"):
        assert_error(response, 401, "invalid_token")


def test_a_verifier_that_crashes_is_a_json_500(seam):
    ANSWER["crash"] = True
    before = rows()
    agent = PersonalAgent()
    agent.client = Client(raise_request_exception=False)  # it re-raises what is reported
    response = agent.post("", {"message": {"id": "x", "sender": "agent", "text": "t"}})
    assert_error(response, 500, "server_error")
    assert rows() == before


def test_the_verifier_gets_method_public_url_and_lowercase_headers(seam):
    agent = PersonalAgent()
    response = agent.post(
        "?wait=0", {"message": {"id": "seam-u", "sender": "agent", "context": {"a": 1}}}
    )
    assert response.status_code == 201, response.content
    request = SEEN[-1]
    assert set(request) >= {"method", "url", "headers"}
    assert request["method"] == "POST"
    assert request["url"].split("?")[0] == "http://testserver/poppy/conversations"
    assert request["headers"]["authorization"].startswith("PoppyFake ")
    conversation_id = response.json()["conversation_id"]
    agent.get(f"/{conversation_id}/events")
    assert SEEN[-1]["method"] == "GET"
    assert (
        SEEN[-1]["url"].split("?")[0]
        == f"http://testserver/poppy/conversations/{conversation_id}/events"
    )


def test_the_public_url_uses_the_configured_base_url(seam):
    with poppy(AUTHENTICATE=f"{HERE}.verifier", BASE_URL="https://api.acme.example"):
        PersonalAgent().get("/cnv_x/events")
    assert (
        SEEN[-1]["url"].split("?")[0] == "https://api.acme.example/poppy/conversations/cnv_x/events"
    )


def test_an_https_issuer_upgrades_the_public_url(seam):
    with poppy(AUTHENTICATE=f"{HERE}.verifier", ISSUER="https://id.acme.example"):
        PersonalAgent().get("/cnv_x/events")
    assert SEEN[-1]["url"].split("?")[0] == "https://testserver/poppy/conversations/cnv_x/events"


def test_forwarded_headers_count_only_when_django_trusts_the_proxy(seam):
    forwarded = {"HTTP_X_FORWARDED_PROTO": "https", "HTTP_X_FORWARDED_HOST": "api.acme.example"}
    with override_settings(ALLOWED_HOSTS=["testserver", "api.acme.example"]):
        PersonalAgent().get("/cnv_x/events", **forwarded)
        assert SEEN[-1]["url"].startswith("http://testserver/")
        with override_settings(
            USE_X_FORWARDED_HOST=True, SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https")
        ):
            PersonalAgent().get("/cnv_x/events", **forwarded)
            assert SEEN[-1]["url"].startswith("https://api.acme.example/poppy/conversations/")


def test_the_verifier_is_read_per_request(agent):
    """Swapping POPPY["AUTHENTICATE"] takes effect on the next request."""
    conversation_id = quiet_start(agent)
    assert agent.read(conversation_id).status_code == 200
    with poppy(AUTHENTICATE=None):
        assert_error(agent.read(conversation_id), 501, "not_implemented")
    assert agent.read(conversation_id).status_code == 200
