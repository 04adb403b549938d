"""Wire errors: ``{"error": code, "error_description"?: text, ...extra}`` with their status."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse

#: The status of every error code of the wire contract.
STATUS_OF: dict[str, int] = {
    "invalid_request": 400,
    "invalid_cursor": 400,
    "invalid_token": 401,
    "invalid_dpop_proof": 401,
    "use_dpop_nonce": 401,
    "sign_in_required": 403,
    "insufficient_scope": 403,
    "not_found": 404,
    "conversation_not_found": 404,
    "method_not_allowed": 405,
    "conversation_closed": 409,
    "message_id_conflict": 409,
    "direct_conversation_open": 409,
    "cursor_expired": 410,
    "request_too_large": 413,
    "too_many_requests": 429,
    "server_error": 500,
    "not_implemented": 501,
}


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
