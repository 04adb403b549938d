"""The operations endpoint in the example's OpenAPI document: its three routes, the
operation object, the confirm body and the refusals — and a real answer fits it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate

from poppy_django.agent import registry
from poppy_django.operations import service
from poppy_django.verifier import Actor

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("shop_orders")]

OPENAPI_JSON = "application/vnd.oai.openapi+json"
BASE = "/poppy/operations/{operation_id}"


def _document() -> dict[str, Any]:
    answer = Client().get("/api/schema", HTTP_ACCEPT=OPENAPI_JSON)
    assert answer.status_code == 200
    document: dict[str, Any] = answer.json()
    return document


def test_the_document_describes_the_operations_endpoint() -> None:
    document = _document()
    validate(document)  # a valid OpenAPI document, operations included
    paths = document["paths"]
    assert set(paths[BASE]) == {"get"}
    assert set(paths[f"{BASE}/confirm"]) == {"post"}
    assert set(paths[f"{BASE}/cancel"]) == {"post"}
    confirm = paths[f"{BASE}/confirm"]["post"]
    assert confirm["operationId"] == "confirm_operation" and confirm["tags"] == ["operations"]
    body = confirm["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    request = document["components"]["schemas"][body.rsplit("/", 1)[1]]
    assert set(request["required"]) == {"revision", "approved_by"}
    assert {"200", "400", "403", "404", "409"} <= set(confirm["responses"])
    assert "terms_changed" in confirm["responses"]["409"]["description"]


def test_a_real_operation_fits_the_documented_object(acme_settings: Any) -> None:
    document = _document()
    tool = registry.get("support").tool("cancel_order")
    assert tool is not None
    operation = service.propose(
        client_id="https://atlas.example",
        user_id="usr_schema_000000000001",
        account_id="acct-1",
        agent_name="support",
        tool=tool,
        arguments={"order_id": "A-2"},
        actor=Actor("account:acct-1", "acct-1"),
        roles=frozenset({"scope:poppy:write"}),
    )
    schema = {"$ref": "#/components/schemas/Operation", "components": document["components"]}
    validator = OAS30Validator(schema)
    wire = operation.to_wire()
    assert "url" in wire and "expires_at" in wire
    validator.validate(wire)
    broken = {**wire, "state": "done", "revision": 0}
    assert not validator.is_valid(broken)
