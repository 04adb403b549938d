"""Django REST framework's face of the configured verifier, for a company's own APIs.

::

    REST_FRAMEWORK = {
        "DEFAULT_AUTHENTICATION_CLASSES": ["poppy_django.rest_framework.DPoPAuthentication"],
        # Optional: adds DPoP-Nonce and Cache-Control: no-store to refusals.
        "EXCEPTION_HANDLER": "poppy_django.rest_framework.exception_handler",
    }

``request.user`` is a :class:`PoppyUser` (not a Django user: a personal agent acting for a
pairwise User) and ``request.auth`` the :class:`~poppy_django.auth.Principal`. The verifier
is ``POPPY["AUTHENTICATE"]``, the same one the conversation endpoint uses. Refusals keep the
verifier's status (401/403), ``WWW-Authenticate`` and the wire's error body.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from poppy_django.auth import AuthRefusal, Principal, RequestInfo
from poppy_django.auth.public_url import public_url
from poppy_django.conf import poppy_settings
from poppy_django.errors import PoppyError

logger = logging.getLogger(__name__)

#: The request attribute a refusal is kept on, for :meth:`DPoPAuthentication.authenticate_header`.
REFUSAL_ATTR = "_poppy_refusal"


class PoppyUser:
    """``request.user`` for a verified personal agent: authenticated, never staff."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False

    def __init__(self, principal: Principal) -> None:
        self.principal = principal
        #: Stable per personal agent and User (e.g. for throttling keys).
        self.pk = self.id = f"{principal.client_id} {principal.user_id}"

    @property
    def account_id(self) -> str | None:
        return self.principal.account_id

    def get_username(self) -> str:
        return self.principal.account_id or self.principal.user_id

    def __str__(self) -> str:
        return self.get_username()


class NotConfigured(exceptions.APIException):
    status_code = 501
    default_detail = {"error": "not_implemented", "error_description": "No verifier configured."}
    default_code = "not_implemented"


class PoppyAuthenticationFailed(exceptions.AuthenticationFailed):
    """A verifier refusal: its status (401 or 403) and the wire's ``{"error", ...}`` body."""

    def __init__(self, refusal: AuthRefusal) -> None:
        body = {"error": refusal.error}
        if refusal.description:
            body["error_description"] = refusal.description
        super().__init__(detail=body, code=refusal.error)
        self.status_code = refusal.status
        self.refusal = refusal


def request_info(request: HttpRequest) -> RequestInfo:
    """``{method, url, headers}`` as every verifier sees it (public URL, lower-case names)."""
    return {
        "method": request.method or "GET",
        "url": public_url(request),
        "headers": {name.lower(): value for name, value in request.headers.items()},
    }


class VerifierUnusable(Exception):
    """The configured verifier raised ``ImproperlyConfigured``: answered as not configured."""


def verify(verifier: Callable[[RequestInfo], Any], request: Request) -> Principal:
    """The verifier's answer for ``request``: its Principal, or its refusal raised.

    The one place a verifier is asked and its answer checked, for both classes below.
    """
    try:
        result = verifier(request_info(request._request))
    except ImproperlyConfigured as exc:
        # A verifier that cannot run (no issuer keys, a refused development authority) is
        # no verifier: 501, as when none is configured; the log says why, the client not.
        logger.error("poppy: the token verifier cannot run: %s", exc)
        raise VerifierUnusable from exc
    if isinstance(result, AuthRefusal):
        raise result
    if not isinstance(result, Principal):
        raise TypeError(f"The verifier returned {type(result).__name__}, not a Principal.")
    return result


class DPoPAuthentication(BaseAuthentication):
    """Authenticates ``Authorization: DPoP`` requests with ``POPPY["AUTHENTICATE"]``.

    Requests without one are left to the next authentication class (DRF then answers 401
    with this class's challenge if none succeeds); a Bearer token is therefore never
    accepted here.
    """

    def authenticate(self, request: Request) -> tuple[PoppyUser, Principal] | None:
        authorization = request.META.get("HTTP_AUTHORIZATION", "")
        if authorization.split(" ", 1)[0].lower() != "dpop":
            return None
        verifier = poppy_settings.AUTHENTICATE
        if verifier is None:
            raise NotConfigured()
        try:
            principal = verify(verifier, request)
        except VerifierUnusable:
            raise NotConfigured() from None
        except AuthRefusal as refusal:
            setattr(request._request, REFUSAL_ATTR, refusal)
            raise PoppyAuthenticationFailed(refusal) from None
        return PoppyUser(principal), principal

    def authenticate_header(self, request: Request) -> str:
        refusal = getattr(request._request, REFUSAL_ATTR, None)
        if isinstance(refusal, AuthRefusal):
            return refusal.www_authenticate
        return f'DPoP algs="{_algs()}"'


class EndpointAuthentication(BaseAuthentication):
    """The conversation endpoint's authentication: every request goes to the verifier.

    Unlike :class:`DPoPAuthentication`, a request without credentials is not passed on: the
    verifier answers it (``401 invalid_token`` with its challenge), and a refusal or a
    missing verifier propagates as-is for the endpoint to answer as the wire's JSON error.
    """

    def authenticate(self, request: Request) -> tuple[PoppyUser, Principal]:
        verifier = poppy_settings.AUTHENTICATE
        if verifier is None:
            raise PoppyError(
                "not_implemented", "No token verifier is configured (POPPY AUTHENTICATE)."
            )
        try:
            principal = verify(verifier, request)
        except VerifierUnusable:
            raise PoppyError(
                "not_implemented", "The token verifier cannot run; the server's log says why."
            ) from None
        return PoppyUser(principal), principal

    def authenticate_header(self, request: Request) -> str:
        return f'DPoP algs="{_algs()}"'


def _algs() -> str:
    return " ".join(poppy_settings.token_options.dpop_algorithms)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus a refusal's extra headers (``DPoP-Nonce``) and ``no-store``."""
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, exceptions.AuthenticationFailed | NotConfigured):
        if isinstance(exc, PoppyAuthenticationFailed):
            for name, value in exc.refusal.headers.items():
                response[name] = value
        response["Cache-Control"] = "no-store"
    return response
