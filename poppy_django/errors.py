"""Wire errors: ``{"error": code, "error_description"?: text, ...extra}`` with their status."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import JsonResponse


@dataclass(frozen=True)
class ErrorCode:
    """An error code the app answers with: its status, and whether the wire contract has it
    (the conversation endpoint's codes, which its OpenAPI document lists)."""

    status: int
    wire: bool = True


#: Every error code the app answers with: the one table (statuses, the schema's enum).
ERRORS: dict[str, ErrorCode] = {
    "invalid_request": ErrorCode(400),
    "invalid_cursor": ErrorCode(400),
    "invalid_token": ErrorCode(401),
    "invalid_dpop_proof": ErrorCode(401),
    "use_dpop_nonce": ErrorCode(401),
    "sign_in_required": ErrorCode(403),
    "insufficient_scope": ErrorCode(403),
    # Django's PermissionDenied on the endpoint's paths (PoppyEndpointMiddleware).
    "forbidden": ErrorCode(403, wire=False),
    "not_found": ErrorCode(404),
    "conversation_not_found": ErrorCode(404),
    "method_not_allowed": ErrorCode(405),
    "conversation_closed": ErrorCode(409),
    "message_id_conflict": ErrorCode(409),
    "direct_conversation_open": ErrorCode(409),
    # The desk's JSON API: an approval decided twice.
    "action_decided": ErrorCode(409, wire=False),
    "cursor_expired": ErrorCode(410),
    "request_too_large": ErrorCode(413),
    "too_many_requests": ErrorCode(429),
    "server_error": ErrorCode(500),
    "not_implemented": ErrorCode(501),
}

#: The status of every error code.
STATUS_OF: dict[str, int] = {code: error.status for code, error in ERRORS.items()}

#: The wire contract's codes, in the table's order.
WIRE_ERROR_CODES: list[str] = [code for code, error in ERRORS.items() if error.wire]


class PoppyError(Exception):
    """A refusal the endpoint answers as a JSON error; raised anywhere below a view."""

    def __init__(
        self,
        code: str,
        description: str | None = None,
        *,
        status: int | None = None,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(description or code)
        self.code = code
        self.description = description
        self.status = status or STATUS_OF[code]
        self.extra = extra or {}
        self.headers = headers or {}

    def response(self) -> JsonResponse:
        return error_response(
            self.code,
            self.description,
            status=self.status,
            extra=self.extra,
            headers=self.headers,
        )


def error_response(
    code: str,
    description: str | None = None,
    *,
    status: int | None = None,
    extra: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> JsonResponse:
    body: dict[str, Any] = {"error": code}
    if description:
        body["error_description"] = description
    body.update(extra or {})
    response = JsonResponse(body, status=status or STATUS_OF[code])
    for name, value in (headers or {}).items():
        response[name] = value
    return response
