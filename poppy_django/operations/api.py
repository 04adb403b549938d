"""A company API that proposes an operation: ``202 {"operation": ...}`` (Operations §4.1).

::

    class CancelOrder(APIView):
        authentication_classes = [DPoPAuthentication]

        def post(self, request, order_id):
            return propose_response(request, "cancel_order", {"order_id": order_id})

The call is gated exactly as the Company Agent's tool is in a conversation (its roles:
``sign_in_required`` / ``insufficient_scope``), and the same action by the same User is the
same operation in every channel. A personal agent whose client metadata does not list
``operations`` v1 is refused ``403 extension_required`` (§3.3).
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from poppy_django.conf import poppy_settings
from poppy_django.errors import PoppyError
from poppy_django.operations import negotiation, service
from poppy_django.operations.options import options
from poppy_django.verifier import Principal


class OperationRefused(exceptions.APIException):
    """A refusal in the wire's ``{"error", ...}`` shape, with its status and challenge."""

    def __init__(self, error: PoppyError) -> None:
        body: dict[str, Any] = {"error": error.code, **error.extra}
        if error.description:
            body["error_description"] = error.description
        super().__init__(detail=body, code=error.code)
        self.status_code = error.status
        challenge = error.headers.get("WWW-Authenticate")
        if challenge:
            self.auth_header = challenge


def propose_response(
    request: Request, tool_name: str, arguments: dict[str, Any], *, agent_name: str | None = None
) -> Response:
    """``202`` with the proposed operation, or the refusal raised for DRF to answer."""
    principal = request.auth
    if not isinstance(principal, Principal):
        raise exceptions.NotAuthenticated()
    try:
        if not options().enabled:
            raise PoppyError("not_found", "This company does not offer operations.")
        if not negotiation.lists_operations(principal.client_id):
            raise PoppyError(
                "extension_required",
                "This API proposes operations: list the operations extension, version 1.",
                extra={"extension": negotiation.EXTENSION},
                headers={
                    "WWW-Authenticate": 'DPoP error="extension_required", extension="operations"'
                },
            )
        operation = service.propose_for(
            principal, tool_name, arguments, agent_name=agent_name or poppy_settings.AGENT
        )
    except PoppyError as error:
        raise OperationRefused(error) from None
    return Response({"operation": operation.to_wire()}, status=202)
