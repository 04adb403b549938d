"""The operations endpoint over HTTP: hostile confirms are clear errors and change nothing.

Operations are proposed through the Python service API (as the example's orders API does);
each refusal is the wire's JSON error, never a 500, and leaves the operation as it was.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from example_project.shop.models import Order
from poppy_django.operations import service
from poppy_django.operations.models import Operation
from poppy_django.verifier import Principal
from poppy_django.verifier.fake import fake_authorization

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]

OWNER = {"client_id": "https://agent.example/client", "user_id": "user-1"}


def _principal(**overrides: Any) -> Principal:
    fields: dict[str, Any] = {
        **OWNER,
        "account_id": "acct-1",
        "signed_in": True,
        "scopes": frozenset({"poppy:write"}),
        **overrides,
    }
    return Principal(**fields)


def _auth(**overrides: Any) -> dict[str, str]:
    fields: dict[str, Any] = {
        **OWNER,
        "account_id": "acct-1",
        "scopes": ("poppy:write",),
        **overrides,
    }
    return {"HTTP_AUTHORIZATION": fake_authorization(**fields)}


def _proposed() -> Operation:
    return service.propose_for(
        _principal(), "cancel_order", {"order_id": "A-2"}, agent_name="support"
    )


def _confirm(operation_id: str, body: Any, **auth: Any) -> Any:
    return Client().post(
        f"/poppy/operations/{operation_id}/confirm",
        data=body if isinstance(body, str) else json.dumps(body),
        content_type="application/json",
        **_auth(**auth),
    )


def _unchanged(operation: Operation) -> None:
    current = Operation.objects.get(pk=operation.pk)
    assert (current.state, current.revision, current.attempts) == (
        operation.state,
        operation.revision,
        0,
    )
    assert Order.objects.get(id="A-2").status == "processing"


def test_a_stale_revision_is_terms_changed_with_the_current_operation() -> None:
    operation = _proposed()
    revised = service.revise(operation.operation_id, summary="Cancel order A-2, fee USD 5")
    answer = _confirm(operation.operation_id, {"revision": 1, "approved_by": "user"})
    assert answer.status_code == 409
    assert answer.json()["error"] == "terms_changed"
    assert answer.json()["operation"] == revised.to_wire()
    _unchanged(revised)


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        [],
        {"approved_by": "user"},
        {"revision": "1", "approved_by": "user"},
        {"revision": True, "approved_by": "user"},
        {"revision": 1, "approved_by": "the model"},
    ],
)
def test_a_malformed_confirm_is_invalid_request(body: Any) -> None:
    operation = _proposed()
    answer = _confirm(operation.operation_id, body)
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_request"
    _unchanged(operation)


def test_standing_permission_for_a_revision_needing_the_user_is_refused() -> None:
    operation = _proposed()
    answer = _confirm(operation.operation_id, {"revision": 1, "approved_by": "standing_permission"})
    assert answer.status_code == 403
    assert answer.json()["error"] == "user_approval_required"
    _unchanged(operation)


def test_another_user_and_an_unknown_id_are_the_same_404() -> None:
    operation = _proposed()
    foreign = _confirm(operation.operation_id, {"revision": 1, "approved_by": "user"}, user_id="u2")
    other_account = _confirm(
        operation.operation_id, {"revision": 1, "approved_by": "user"}, account_id="acct-2"
    )
    unknown = _confirm("op_nothing", {"revision": 1, "approved_by": "user"})
    malformed = _confirm("no:such", {"revision": 1, "approved_by": "user"})
    for answer in (foreign, other_account, unknown, malformed):
        assert answer.status_code == 404
        assert answer.json()["error"] == "operation_not_found"
    _unchanged(operation)


def test_signed_out_on_an_accounts_operation_is_sign_in_required() -> None:
    operation = _proposed()
    answer = _confirm(
        operation.operation_id, {"revision": 1, "approved_by": "user"}, account_id=None, scopes=()
    )
    assert answer.status_code == 403
    assert answer.json()["error"] == "sign_in_required"
    _unchanged(operation)


def test_a_token_without_the_tools_scope_cannot_confirm() -> None:
    operation = _proposed()
    answer = _confirm(
        operation.operation_id, {"revision": 1, "approved_by": "user"}, scopes=("poppy:read",)
    )
    assert answer.status_code == 403
    assert answer.json()["error"] == "insufficient_scope"
    assert 'scope="poppy:write"' in answer["WWW-Authenticate"]
    _unchanged(operation)


def test_cancelled_then_confirmed_returns_it_unchanged() -> None:
    operation = _proposed()
    cancelled = Client().post(
        f"/poppy/operations/{operation.operation_id}/cancel",
        data="{}",
        content_type="application/json",
        **_auth(),
    )
    assert cancelled.status_code == 200
    assert cancelled.json()["state"] == "cancelled"
    assert cancelled.json()["result"]["summary"]
    late = _confirm(operation.operation_id, {"revision": 1, "approved_by": "user"})
    assert late.status_code == 200
    assert late.json() == cancelled.json()
    assert Order.objects.get(id="A-2").status == "processing"


def test_wrong_methods_and_paths_are_json_errors() -> None:
    operation = _proposed()
    put = Client().put(f"/poppy/operations/{operation.operation_id}", **_auth())
    assert put.status_code == 405 and put.json()["error"] == "method_not_allowed"
    assert put["Allow"] == "GET"
    deeper = Client().get(f"/poppy/operations/{operation.operation_id}/x/y", **_auth())
    assert deeper.status_code == 404 and deeper.json()["error"] == "not_found"
    unauthenticated = Client().get(f"/poppy/operations/{operation.operation_id}")
    assert unauthenticated.status_code == 401
    assert unauthenticated.json()["error"] == "invalid_token"


def _read_back(operation: Operation) -> dict[str, Any]:
    read = Client().get(f"/poppy/operations/{operation.operation_id}", **_auth())
    assert read.status_code == 200
    body: dict[str, Any] = read.json()
    assert body["state"] == "proposed"
    assert body["terms"] == {"order_id": "A-2"}
    assert body["expires_at"].endswith("Z")
    assert body["confirmation"] is None and body["result"] is None
    return body


def test_the_operation_reads_back_by_id_with_its_page(settings: Any) -> None:
    """PAGE_PATH set and an origin known (the test settings' dev authority): a ``url``."""
    if not settings.POPPY["OPERATIONS"].get("PAGE_PATH"):
        pytest.skip("the operation page needs the authority extra (browser sessions)")
    operation = _proposed()
    body = _read_back(operation)
    assert body["url"].endswith(f"/operations/{operation.operation_id}")


def test_the_operation_reads_back_without_null_members(settings: Any) -> None:
    """No PAGE_PATH: no page, and the member is absent rather than null."""
    settings.POPPY = {
        **settings.POPPY,
        "OPERATIONS": {**settings.POPPY["OPERATIONS"], "PAGE_PATH": None},
    }
    body = _read_back(_proposed())
    assert "url" not in body
