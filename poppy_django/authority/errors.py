"""OAuth error responses (RFC 6749 §5.2) from Authlib's error classes, never cached.

A refusal's description is fixed per check and never repeats what the caller sent: an
assertion, a proof or a token must not come back in an error body or a log line.
"""

from __future__ import annotations

from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import InvalidClientError
from django.http import JsonResponse


class InvalidDPoPProofError(OAuth2Error):
    """RFC 9449 §5: the token request's DPoP proof is missing or wrong."""

    error = "invalid_dpop_proof"
    status_code = 400


class UseDPoPNonceError(OAuth2Error):
    """RFC 9449 §8: the proof must carry the server nonce sent in ``DPoP-Nonce``."""

    error = "use_dpop_nonce"
    status_code = 400

    def __init__(self, nonce: str) -> None:
        super().__init__("Sign the DPoP proof with the nonce in the DPoP-Nonce header.")
        self.nonce = nonce


class InvalidSessionError(OAuth2Error):
    """Poppy: the ``session_id`` is unknown, ended, or another User's or client's."""

    error = "invalid_session"
    status_code = 400


class AccountMismatchError(OAuth2Error):
    """Poppy §4.4: a Session once signed in to one account is never signed in to another."""

    error = "account_mismatch"
    status_code = 400


class TooManySessionsError(OAuth2Error):
    """The client started more Sessions than ``SESSIONS_PER_CLIENT_PER_MINUTE`` allows."""

    error = "too_many_requests"
    status_code = 429


class UnauthorizedClient(InvalidClientError):
    """``invalid_client`` answered 401, as RFC 6749 §5.2 asks for failed client authentication."""

    status_code = 401


__all__ = [
    "AccountMismatchError",
    "InvalidDPoPProofError",
    "InvalidSessionError",
    "TooManySessionsError",
    "UnauthorizedClient",
    "UseDPoPNonceError",
    "oauth_error_response",
]


def no_store(response: JsonResponse) -> JsonResponse:
    """Mark a response carrying (or refusing) credentials as never cached."""
    response["Cache-Control"] = "no-store"
    response["Pragma"] = "no-cache"
    return response


def oauth_error_response(error: OAuth2Error, headers: dict[str, str] | None = None) -> JsonResponse:
    """``{"error", "error_description"?}`` with the error's status and ``no-store``."""
    body = dict(error.get_body())
    response = JsonResponse(body, status=error.status_code or 400)
    if isinstance(error, UseDPoPNonceError):
        response["DPoP-Nonce"] = error.nonce
    for name, value in (headers or {}).items():
        response[name] = value
    return no_store(response)
