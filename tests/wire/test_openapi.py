"""The OpenAPI 3 document the example project serves: valid, complete, and true to the wire.

The last test sends a sample of requests and checks each real answer against what the
document says for that operation and status (the status is listed; the body validates).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate

from poppy_django.api.schema import ERROR_CODES
from tests.agents import ENDPOINT, PersonalAgent
from tests.wire.wire_support import poppy, quiet_start

pytestmark = pytest.mark.django_db(transaction=True)

OPENAPI_JSON = "application/vnd.oai.openapi+json"
CONVERSATION_ROUTES = {
    ("/poppy/conversations", "post"),
    ("/poppy/conversations/{conversation_id}/messages", "post"),
    ("/poppy/conversations/{conversation_id}/events", "get"),
    ("/poppy/conversations/{conversation_id}/handoff", "post"),
    ("/poppy/conversations/{conversation_id}/close", "post"),
}
#: The Operations extension's endpoint (on in the test settings, as in the example).
OPERATION_ROUTES = {
    ("/poppy/operations/{operation_id}", "get"),
    ("/poppy/operations/{operation_id}/confirm", "post"),
    ("/poppy/operations/{operation_id}/cancel", "post"),
}
ROUTES = CONVERSATION_ROUTES | OPERATION_ROUTES


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    response = Client().get("/api/schema", HTTP_ACCEPT=OPENAPI_JSON)
    assert response.status_code == 200
    return response.json()


def test_the_document_is_valid_openapi_3(document):
    assert document["openapi"].startswith("3.")
    validate(document)


def test_every_route_event_type_and_error_is_described(document):
    described = {
        (path, method)
        for path, operations in document["paths"].items()
        if path.startswith("/poppy/")
        for method in operations
    }
    assert described == ROUTES
    schemas = document["components"]["schemas"]
    event_types = {
        schemas[ref["$ref"].rpartition("/")[2]]["properties"]["type"]["enum"][0]
        if "enum" in schemas[ref["$ref"].rpartition("/")[2]]["properties"]["type"]
        else _enum(schemas, schemas[ref["$ref"].rpartition("/")[2]]["properties"]["type"])[0]
        for ref in schemas["Event"]["oneOf"]
    }
    assert event_types == {
        "message",
        "state",
        "authorization",
        "user_requested",
        "direct_opened",
        "direct_closed",
    }
    # The wire contract's codes (poppy-wire.md's Errors and Auth sections), written out here:
    # the document must list exactly these, whatever the code generating it says.
    assert set(_enum(schemas, schemas["Error"]["properties"]["error"])) == WIRE_CONTRACT_ERRORS
    assert set(ERROR_CODES) == WIRE_CONTRACT_ERRORS
    assert set(_enum(schemas, schemas["Read"]["properties"]["status"])) == {
        "working",
        "idle",
        "queued",
        "closed",
    }
    assert "TextDelta" in schemas
    for path, method in ROUTES:
        responses = document["paths"][path][method]["responses"]
        assert {"401", "429", "500", "503"} <= set(responses)
        assert ("403" if (path, method) in CONVERSATION_ROUTES else "404") in responses
        assert "Retry-After" in responses["429"]["headers"]
        assert "Retry-After" in responses["503"]["headers"]
        assert document["paths"][path][method]["security"] == [{"PoppySessionToken": []}]


def test_requests_are_described_as_the_wire_reads_them(document):
    """JSON bodies only, ``wait`` never negative, a message with text, data or context."""
    for path, method in ROUTES:
        operation = document["paths"][path][method]
        if method == "post":
            assert set(operation["requestBody"]["content"]) == {"application/json"}, path
        for parameter in operation.get("parameters", []):
            if parameter["name"] == "wait":
                assert parameter["schema"]["minimum"] == 0
    rules = document["components"]["schemas"]["MessageRequest"]["anyOf"]
    assert [rule["required"] for rule in rules] == [["text"], ["data"], ["context"]]


WIRE_CONTRACT_ERRORS = {
    "invalid_request",
    "invalid_cursor",
    "invalid_token",
    "invalid_dpop_proof",
    "use_dpop_nonce",
    "sign_in_required",
    "insufficient_scope",
    "not_found",
    "conversation_not_found",
    "method_not_allowed",
    "conversation_closed",
    "message_id_conflict",
    "direct_conversation_open",
    "cursor_expired",
    "request_too_large",
    "too_many_requests",
    "server_error",
    "not_implemented",
    "temporarily_unavailable",
}


def _enum(schemas: dict[str, Any], prop: dict[str, Any]) -> list[str]:
    ref = prop.get("$ref") or prop.get("allOf", [{}])[0].get("$ref")
    return schemas[ref.rpartition("/")[2]]["enum"] if ref else prop["enum"]


def check(document: dict[str, Any], path: str, method: str, response: Any) -> None:
    """The real answer is what the document says for this operation and status."""
    operation = document["paths"][path][method]
    status = str(response.status_code)
    assert status in operation["responses"], (path, method, status, response.content[:200])
    content = operation["responses"][status]["content"]
    media_type = response["Content-Type"].split(";")[0]
    assert media_type in content, (path, method, status, media_type)
    if media_type != "application/json":
        return
    schema = {**content[media_type]["schema"], "components": document["components"]}
    errors = list(OAS30Validator(schema).iter_errors(response.json()))
    assert not errors, (path, method, status, [e.message for e in errors], response.json())


def test_real_answers_match_the_document(document, agent, acct1, throttle_clock):
    cache.clear()
    conversations = "/poppy/conversations"
    messages = conversations + "/{conversation_id}/messages"
    events = conversations + "/{conversation_id}/events"
    handoff = conversations + "/{conversation_id}/handoff"
    close = conversations + "/{conversation_id}/close"

    started = agent.start("hello")
    check(document, conversations, "post", started)
    conversation_id = started.json()["conversation_id"]
    agent.settled(conversation_id)
    check(document, events, "get", agent.read(conversation_id))
    check(document, events, "get", agent.read(conversation_id, "?wait=0.1&cursor=nope"))
    check(document, events, "get", agent.read(conversation_id, "?wait=x"))
    check(document, events, "get", agent.read(conversation_id, HTTP_ACCEPT="text/event-stream"))
    check(document, messages, "post", agent.send(conversation_id, "hours?"))
    check(document, messages, "post", agent.send(conversation_id, "hi", query="?wait=0"))
    check(document, messages, "post", agent.post(f"/{conversation_id}/messages", {"x": 1}))
    check(document, messages, "post", agent.send("cnv_unknown", "hi"))
    agent.settled(conversation_id)
    # Signed in: a Direct Conversation, its parent refusing messages, and a handoff.
    parent_id = quiet_start(acct1)
    direct = acct1.start("hi", parent_conversation_id=parent_id)
    check(document, conversations, "post", direct)
    check(document, messages, "post", acct1.send(parent_id, "there"))
    check(document, handoff, "post", agent.post(f"/{conversation_id}/handoff"))
    check(document, close, "post", agent.post(f"/{conversation_id}/close"))
    check(document, messages, "post", agent.send(conversation_id, "closed?"))
    check(document, close, "post", agent.post(f"/{conversation_id}/close", raw=b"{bad"))
    # Refusals before the view: method, authentication, throttling.
    client = Client()
    check(document, events, "get", client.get(f"{ENDPOINT}/{conversation_id}/events"))
    wrong = agent.client.get(ENDPOINT, **agent.headers())
    assert wrong.status_code == 405
    with poppy(THROTTLE_RATES={"conversation_start": "1/minute"}):
        someone = PersonalAgent()
        check(document, conversations, "post", someone.start("one"))
        check(document, conversations, "post", someone.start("two"))
    cache.clear()
