"""The MCP server and its tokens, refused where they should be: JSON errors, never a 500."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.agents import PersonalAgent
from tests.authority.sdk_agent import DOMAIN, ORIGIN

pytestmark = pytest.mark.django_db(transaction=True)

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
    assert challenge.startswith("DPoP")
    assert f'resource_metadata="{ORIGIN}/.well-known/oauth-protected-resource/poppy/mcp"' in (
        challenge
    )


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
