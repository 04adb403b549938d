"""The operations endpoint in the OpenAPI document (Operations v1 §3, §5).

Serializers used only for the document: the operation object as
:meth:`~poppy_django.operations.models.Operation.to_wire` writes it, the confirm body
:func:`~poppy_django.operations.service.confirm` reads, and the refusals each route gives.
:func:`operations_schema` decorates each route's handler, as
:func:`poppy_django.api.schema.endpoint_schema` does the conversation endpoint's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers

from poppy_django.operations.models import OperationState
from poppy_django.operations.service import APPROVERS


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "description": "Null until confirmed: which revision, by whom, when.",
        "properties": {
            "revision": {"type": "integer", "minimum": 1},
            "approved_by": {"type": "string", "enum": list(APPROVERS)},
            "confirmed_at": {"type": "string", "format": "date-time"},
        },
        "required": ["revision", "approved_by", "confirmed_at"],
    }
)
class ConfirmationField(serializers.JSONField):
    pass


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "description": "Null until final: what happened (and what was changed, if it failed).",
        "properties": {"summary": {"type": "string"}, "data": {}},
        "required": ["summary"],
    }
)
class ResultField(serializers.JSONField):
    pass


class OperationSerializer(serializers.Serializer):
    """The operation object; absent members are omitted, ``confirmation`` and ``result``
    are null until something happens."""

    operation_id = serializers.CharField()
    revision = serializers.IntegerField(min_value=1)
    state = serializers.ChoiceField(choices=list(OperationState.values))
    summary = serializers.CharField()
    user_approval_required = serializers.BooleanField()
    terms = serializers.DictField(required=False)
    url = serializers.URLField(required=False, help_text="Its page on the company's website.")
    expires_at = serializers.DateTimeField(required=False, help_text="While proposed.")
    confirmation = ConfirmationField(allow_null=True)
    result = ResultField(allow_null=True)


class ConfirmRequestSerializer(serializers.Serializer):
    revision = serializers.IntegerField(help_text="The exact revision the User approved.")
    approved_by = serializers.ChoiceField(choices=list(APPROVERS))


class OperationErrorSerializer(serializers.Serializer):
    error = serializers.CharField()
    error_description = serializers.CharField(required=False)
    operation = OperationSerializer(
        required=False, help_text="terms_changed: the current revision, to show the User."
    )


def _error(codes: str) -> OpenApiResponse:
    return OpenApiResponse(OperationErrorSerializer, description=codes)


_OPERATION = OpenApiResponse(
    OperationSerializer,
    description="The operation as it is now (Retry-After while in_progress).",
)
_COMMON = {
    401: _error("invalid_token, invalid_dpop_proof, use_dpop_nonce (with DPoP-Nonce)"),
    404: _error("operation_not_found: unknown, or another agent's, User's or account's"),
    405: _error("method_not_allowed"),
    429: _error("too_many_requests"),
    500: _error("server_error"),
    503: _error("temporarily_unavailable: the database or Redis out of reach, named"),
}
_ROUTES: dict[str, dict[str, Any]] = {
    "read": {
        "operation_id": "read_operation",
        "summary": "Read an operation by id (after a lost answer, too)",
        "responses": {200: _OPERATION, 403: _error("sign_in_required"), **_COMMON},
    },
    "confirm": {
        "operation_id": "confirm_operation",
        "summary": "Confirm the exact revision the User (or a standing permission) approved",
        "request": {"application/json": ConfirmRequestSerializer},
        "responses": {
            200: OpenApiResponse(
                OperationSerializer,
                description="Confirmed (or, confirmed before, unchanged): succeeded or failed "
                "once the worker finished within CONFIRM_WAIT_SECONDS, else in_progress with "
                "Retry-After.",
            ),
            400: _error("invalid_request"),
            403: _error("sign_in_required, insufficient_scope, user_approval_required"),
            409: _error("terms_changed, with the current operation"),
            **_COMMON,
        },
    },
    "cancel": {
        "operation_id": "cancel_operation",
        "summary": "Cancel a proposal (one in progress or final is returned unchanged)",
        "request": {"application/json": OpenApiTypes.OBJECT},
        "responses": {
            200: _OPERATION,
            400: _error("invalid_request: malformed JSON"),
            403: _error("sign_in_required"),
            **_COMMON,
        },
    },
}


def operations_schema(name: str) -> Callable[[Any], Any]:
    """The document's description of one operations route's handler."""

    def decorate(handler: Any) -> Any:
        handler.schema = AutoSchema
        return extend_schema(tags=["operations"], **_ROUTES[name])(handler)

    return decorate
