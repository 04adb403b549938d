"""Wire errors: ``{"error": code, "error_description"?: text, ...extra}`` with their status."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import JsonResponse


@dataclass(frozen=True)
class ErrorCode:
    """An error code the app answers with: its status, and whether the conversation wire's
    contract has it (the endpoint's codes, which its OpenAPI document lists)."""

    status: int
    wire: bool = True


#: Every error code the app answers with, and the one place its status is written: what
#: :func:`error_response` and :class:`PoppyError` answer, on the endpoint, the desk, the
#: Operations and MCP APIs, the sign-in channels and feedback, and the service API's refusals.
#: A code outside it comes only from a company's own code (a verifier's refusal, a DRF
#: exception's ``code``); ``tests/wire/test_error_codes.py`` holds the package to it. The
#: issuer's token endpoint answers OAuth's errors (RFC 6749 §5.2) from Authlib's classes.
ERRORS: dict[str, ErrorCode] = {
    # The conversation wire (its table in docs/rest-framework.md, the OpenAPI enum).
    "invalid_request": ErrorCode(400),
    "invalid_cursor": ErrorCode(400),
    "invalid_token": ErrorCode(401),
    "invalid_dpop_proof": ErrorCode(401),
    "use_dpop_nonce": ErrorCode(401),
    "sign_in_required": ErrorCode(403),
    "insufficient_scope": ErrorCode(403),
    "not_found": ErrorCode(404),
    "conversation_not_found": ErrorCode(404),
    "method_not_allowed": ErrorCode(405),
    "conversation_closed": ErrorCode(409),
    "message_id_conflict": ErrorCode(409),
    "direct_conversation_open": ErrorCode(409),
    "cursor_expired": ErrorCode(410),
    # A company API's write: the Idempotency-Key names another request (or one running).
    "idempotency_key_conflict": ErrorCode(409, wire=False),
    "request_timeout": ErrorCode(408, wire=False),
    "request_too_large": ErrorCode(413),
    "too_many_requests": ErrorCode(429),
    "server_error": ErrorCode(500),
    "not_implemented": ErrorCode(501),
    # The database or Redis out of reach, or no database connection free in time: the
    # description names which; ``Retry-After`` says when to try again.
    "temporarily_unavailable": ErrorCode(503),
    # Django's PermissionDenied on the endpoint's paths (PoppyEndpointMiddleware).
    "forbidden": ErrorCode(403, wire=False),
    # The desk's JSON API: an approval decided twice.
    "action_decided": ErrorCode(409, wire=False),
    # The service API's one-owner rule (docs/service.md), as the desk answers it: another
    # staff member has the conversation (``holder`` names them); a reply written over events
    # the staffer had not seen (``arrived`` lists them); a transfer or leave by someone who
    # does not hold it; an assignment to someone not on the desk, or of a conversation not
    # waiting for a person.
    "held_by_other": ErrorCode(409, wire=False),
    "conversation_changed": ErrorCode(409, wire=False),
    "not_holder": ErrorCode(409, wire=False),
    "unknown_staff": ErrorCode(400, wire=False),
    "unknown_team": ErrorCode(400, wire=False),
    "not_missed": ErrorCode(409, wire=False),
    "team_unavailable": ErrorCode(409, wire=False),
    "not_waiting": ErrorCode(409, wire=False),
    # An API (Operations, MCP) used without negotiating its extension (§3.3): the SDK's
    # clients read the code and its ``extension``.
    "extension_required": ErrorCode(403, wire=False),
    # The Operations extension v1 (docs/operations-extension.md), as its clients read them.
    "user_approval_required": ErrorCode(403, wire=False),
    "operation_not_found": ErrorCode(404, wire=False),
    "terms_changed": ErrorCode(409, wire=False),
    # The company's own calls refused (operations.service.revise and settle, Python only):
    # an operation no longer proposed, one whose outcome is not unknown.
    "operation_not_proposed": ErrorCode(409, wire=False),
    "operation_not_unknown": ErrorCode(409, wire=False),
    # The sign-in channels (browser, Mediated Sign-In) and feedback (docs/channels.md).
    "invalid_session": ErrorCode(400, wire=False),
    "invalid_scope": ErrorCode(400, wire=False),
    "invalid_browser_assertion": ErrorCode(400, wire=False),
    "invalid_return_to": ErrorCode(400, wire=False),
    "sign_in_not_found": ErrorCode(404, wire=False),
    # The channels' and the SDK's name for a 429 (its Mediated Sign-In, feedback and MCP
    # clients read it); the conversation wire's is ``too_many_requests``, so both stay.
    "rate_limited": ErrorCode(429, wire=False),
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
