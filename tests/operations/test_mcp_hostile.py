"""The MCP server and its tokens, refused where they should be: JSON errors, never a 500."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.agents import PersonalAgent
from tests.authority.sdk_agent import DOMAIN, ORIGIN

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]

MCP = f"{ORIGIN}/poppy/mcp"


def _post(body: bytes, **headers: Any) -> Any:
    return Client().post(
        "/poppy/mcp",
        data=body,
        content_type="application/json",
        secure=True,
        HTTP_HOST=DOMAIN,
        **headers,
    )


def test_no_token_is_401_naming_the_resource_metadata(acme_settings: Any) -> None:
    answer = _post(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
    assert answer.status_code == 401
    assert answer.json()["error"] == "invalid_token"
    challenge = answer["WWW-Authenticate"]
    metadata = f'resource_metadata="{ORIGIN}/.well-known/oauth-protected-resource/poppy/mcp"'
    # One challenge per scheme it accepts, Bearer then DPoP, each naming the metadata.
    assert challenge.startswith(f"Bearer {metadata}, DPoP ")
    assert challenge.count(metadata) == 2
    assert "error=" not in challenge  # no credentials, no error (RFC 6750 §3.1)


def test_the_metadata_names_the_resource_and_the_issuer(acme_settings: Any) -> None:
    answer = Client().get(
        "/.well-known/oauth-protected-resource/poppy/mcp", secure=True, HTTP_HOST=DOMAIN
    )
    assert answer.status_code == 200
    document = answer.json()
    assert document["resource"] == MCP
    assert document["authorization_servers"] == [ORIGIN]
    assert "ES256" in document["dpop_signing_alg_values_supported"]
    assert {"poppy:read", "poppy:write"} <= set(document["scopes_supported"])


def test_a_wrong_method_is_405(acme_settings: Any) -> None:
    answer = Client().get("/poppy/mcp", secure=True, HTTP_HOST=DOMAIN)
    assert answer.status_code == 405 and answer["Allow"] == "POST"


def test_no_token_is_issued_for_another_resource(acme_settings: Any) -> None:
    agent = PersonalAgent.with_identity()
    refused = agent.start_session(resource=f"{ORIGIN}/api/orders")
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_target"
    issued = agent.start_session(resource=MCP)
    assert issued.status_code == 200, issued.content
    assert issued.json()["token_type"] == "DPoP"


# -- Bearer tokens: a Bearer MCP server's (POPPY["MCP"]["DPOP"] False), good only there ----


@pytest.fixture
def bearer_server(acme_settings: Any) -> Any:
    """The MCP server without DPoP: the company issues Bearer tokens for its URL (§4.3)."""
    acme_settings.POPPY = {
        **acme_settings.POPPY,
        "MCP": {**acme_settings.POPPY.get("MCP", {}), "DPOP": False},
    }
    return acme_settings


MCP_METADATA = f'resource_metadata="{ORIGIN}/.well-known/oauth-protected-resource/poppy/mcp"'
PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


def _bearer_session(
    agent: PersonalAgent, user: str = "usr_hand_bearer_0000001", **form: str
) -> Any:
    """The jwt-bearer grant without a DPoP proof, for ``resource`` (MCP unless given)."""
    body = {
        "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
        "assertion": agent.signed(agent.claims(user)),
        **agent.client_form(),
        "resource": MCP,
        **form,
    }
    return agent.post_form("/oauth/token", body)


def _claims(token: str) -> dict[str, Any]:
    import jwt

    return dict(jwt.decode(token, options={"verify_signature": False}))


def _call(token: str, tool: str, scheme: str = "Bearer") -> Any:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool}}
    import json

    return _post(json.dumps(body).encode(), HTTP_AUTHORIZATION=f"{scheme} {token}")


def test_a_dpop_mcp_server_never_gets_a_bearer_token(acme_settings: Any) -> None:
    """The type is the server's: no proof for a DPoP server's resource is refused."""
    refused = _bearer_session(PersonalAgent.with_identity())
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_dpop_proof"
    assert "access_token" not in refused.json()


def test_a_bearer_server_gets_bearer_tokens_that_work_there(bearer_server: Any) -> None:
    metadata = (
        Client()
        .get("/.well-known/oauth-protected-resource/poppy/mcp", secure=True, HTTP_HOST=DOMAIN)
        .json()
    )
    assert "dpop_signing_alg_values_supported" not in metadata  # it supports no DPoP
    bare = _post(PING)
    assert bare.status_code == 401 and bare["WWW-Authenticate"] == f"Bearer {MCP_METADATA}"
    agent = PersonalAgent.with_identity()
    with_proof = agent.start_session("usr_hand_bearer_0000009", resource=MCP)
    assert with_proof.json()["token_type"] == "Bearer"  # even with a proof, never DPoP
    assert "cnf" not in _claims(with_proof.json()["access_token"])
    issued = _bearer_session(agent)
    assert issued.status_code == 200, issued.content
    body = issued.json()
    assert body["token_type"] == "Bearer"
    claims = _claims(body["access_token"])
    assert claims["aud"] == MCP and "cnf" not in claims
    token = body["access_token"]
    assert _post(PING, HTTP_AUTHORIZATION=f"Bearer {token}").json()["result"] == {}
    hours = _call(token, "store_hours")
    assert hours.status_code == 200 and hours.json()["result"]["isError"] is False
    # Signed out: the scope-gated read is refused, both challenges naming the scope.
    refused = _call(token, "list_orders")
    assert refused.status_code == 403
    assert refused.json()["error"] == "sign_in_required"
    assert refused["WWW-Authenticate"] == (
        f'Bearer error="sign_in_required", scope="poppy:read", {MCP_METADATA}'
    )


def test_a_bearer_token_is_refused_everywhere_but_its_mcp_server(bearer_server: Any) -> None:
    agent = PersonalAgent.with_identity()
    token = _bearer_session(agent).json()["access_token"]
    client = Client()
    for method, path in (
        ("post", "/poppy/conversations"),
        ("get", "/api/orders"),
        ("get", "/poppy/operations/op_anything"),
    ):
        url = f"{ORIGIN}{path}"
        for scheme, extra in (
            ("Bearer", {}),
            ("DPoP", {"HTTP_DPOP": agent.proof(url, method.upper(), ath=_ath(token))}),
        ):
            answer = getattr(client, method)(
                path,
                data=b"{}" if method == "post" else None,
                content_type="application/json",
                secure=True,
                HTTP_HOST=DOMAIN,
                HTTP_AUTHORIZATION=f"{scheme} {token}",
                **extra,
            )
            assert answer.status_code == 401, (method, path, scheme, answer.content)
            assert token not in answer.content.decode()
    # Nor is it a DPoP token at the MCP server itself: it is bound to no key.
    url = MCP
    as_dpop = _post(
        PING,
        HTTP_AUTHORIZATION=f"DPoP {token}",
        HTTP_DPOP=agent.proof(url, "POST", ath=_ath(token)),
    )
    assert as_dpop.status_code == 401 and as_dpop.json()["error"] == "invalid_token"


def _ath(token: str) -> str:
    import base64
    import hashlib

    return base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=").decode()


def test_a_dpop_bound_token_sent_as_bearer_is_refused(acme_settings: Any) -> None:
    agent = PersonalAgent.with_identity()
    for resource in (MCP, None):  # the MCP server's DPoP token, and the endpoint's
        issued = agent.start_session(**({"resource": resource} if resource else {}))
        token = issued.json()["access_token"]
        assert issued.json()["token_type"] == "DPoP"
        answer = _post(PING, HTTP_AUTHORIZATION=f"Bearer {token}")
        assert answer.status_code == 401, answer.content
        assert answer.json()["error"] == "invalid_token"
        challenge = answer["WWW-Authenticate"]
        assert challenge.startswith('Bearer error="invalid_token"')
        assert challenge.count(MCP_METADATA) == 2
        assert token not in answer.content.decode()


def test_no_bearer_token_is_issued_for_another_resource_or_none(bearer_server: Any) -> None:
    agent = PersonalAgent.with_identity()
    elsewhere = _bearer_session(agent, resource=f"{ORIGIN}/api/orders")
    assert elsewhere.status_code == 400 and elsewhere.json()["error"] == "invalid_target"
    endpoint = _bearer_session(agent, resource="")
    assert endpoint.status_code == 400 and endpoint.json()["error"] == "invalid_dpop_proof"
    forged = _post(PING, HTTP_AUTHORIZATION="Bearer not.a.token")
    assert forged.status_code == 401 and forged.json()["error"] == "invalid_token"
    empty = _post(PING, HTTP_AUTHORIZATION="Bearer")
    assert empty.status_code == 401


def test_a_bearer_token_renewing_a_session_keeps_its_key_and_ends_with_it(
    bearer_server: Any,
) -> None:
    from poppy_django.authority.models import Session

    agent = PersonalAgent.with_identity()
    user = "usr_hand_bearer_0000002"
    started = agent.start_session(user)
    session_id = started.json()["session_id"]
    jkt = Session.objects.get(session_id=session_id).jkt
    renewed = _bearer_session(agent, user, session_id=session_id)
    assert renewed.status_code == 200 and renewed.json()["token_type"] == "Bearer"
    assert renewed.json()["session_id"] == session_id
    assert Session.objects.get(session_id=session_id).jkt == jkt  # the DPoP key stays
    token = renewed.json()["access_token"]
    assert _post(PING, HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200
    revoked = agent.post_form("/oauth/revoke", {"token": token, **agent.client_form()})
    assert revoked.status_code == 200
    after = _post(PING, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert after.status_code == 401 and after.json()["error"] == "invalid_token"
