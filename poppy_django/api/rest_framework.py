"""Django REST framework's face of the configured verifier, for a company's own APIs.

::

    REST_FRAMEWORK = {
        "DEFAULT_AUTHENTICATION_CLASSES": ["poppy_django.rest_framework.DPoPAuthentication"],
        # Answers refusals as the conversation endpoint does: DPoP-Nonce, no-store.
        "EXCEPTION_HANDLER": "poppy_django.rest_framework.exception_handler",
    }

``request.user`` is a :class:`PoppyUser` (not a Django user: a personal agent acting for a
pairwise User) and ``request.auth`` the :class:`~poppy_django.verifier.Principal`. The verifier
is ``POPPY["AUTHENTICATE"]``, the same one the conversation endpoint uses.

Every refusal is an ``APIException`` (:class:`PoppyAPIException`: its status, the wire's
``{"error", "error_description"}`` body as its detail, its ``WWW-Authenticate``), so DRF's
own exception handling answers it in any ``APIView``. :func:`exception_handler` answers this
app's refusals with the one translation of an exception to the wire
(:func:`~poppy_django.api.wire_errors.wire_error_response`, which the endpoint uses too:
``DPoP-Nonce``, ``Cache-Control: no-store``), and a request without a Session Token, or with
one sent as ``Bearer``, as the endpoint does.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request
from rest_framework.views import exception_handler as drf_exception_handler

from poppy_django.api.idempotency import IdempotentWrites  # noqa: F401 - the public path re-exports it
from poppy_django.api.wire_errors import PoppyAPIException, wire_error_response
from poppy_django.conf import poppy_settings
from poppy_django.errors import PoppyError
from poppy_django.observe import tracing
from poppy_django.store import storable
from poppy_django.verifier import Authenticate, AuthRefusal, Principal, RequestInfo
from poppy_django.verifier.public_url import public_url

logger = logging.getLogger("poppy_django.rest_framework")

#: The DRF request attribute a refusal is kept on, for ``authenticate_header``.
REFUSAL_ATTR = "poppy_refusal"


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


class PoppyAuthenticationFailed(PoppyAPIException, exceptions.AuthenticationFailed):
    """A verifier refusal: its status (401 or 403), challenge and ``DPoP-Nonce``."""

    def __init__(self, refusal: AuthRefusal) -> None:
        super().__init__(refusal)
        self.refusal = refusal


class NotConfigured(PoppyAPIException):
    """No verifier, or one that cannot run: ``501 not_implemented`` (the log says why)."""

    def __init__(self, description: str = "No token verifier is configured.") -> None:
        super().__init__(PoppyError("not_implemented", description))


def request_info(request: HttpRequest | Request) -> RequestInfo:
    """``{method, url, headers}`` as every verifier sees it (public URL, lower-case names).

    DRF's ``Request`` stands in for Django's ``HttpRequest`` (it proxies its attributes).
    """
    django_request = cast(HttpRequest, request)
    return {
        "method": django_request.method or "GET",
        "url": public_url(django_request),
        "headers": {name.lower(): value for name, value in django_request.headers.items()},
    }


def authenticate(request: Request) -> tuple[PoppyUser, Principal]:
    """The configured verifier's answer for ``request``, as DRF's authentication contract
    wants it: ``(user, principal)``, or an ``APIException`` (a refusal, or 501).

    The one place a verifier is asked and its answer checked, for both classes below.
    """
    verifier: Authenticate | None = poppy_settings.AUTHENTICATE
    if verifier is None:
        raise NotConfigured("No token verifier is configured (POPPY AUTHENTICATE).")
    try:
        result = verifier(request_info(request))
    except ImproperlyConfigured as exc:
        # A verifier that cannot run (no issuer keys, a refused development mode) is no
        # verifier: 501, as when none is configured; the log says why, the client not.
        logger.error("poppy: the token verifier cannot run: %s", exc)
        raise NotConfigured("The token verifier cannot run; the server's log says why.") from None
    except AuthRefusal as refusal:
        result = refusal
    if isinstance(result, AuthRefusal):
        tracing.event("identity_checked", outcome="refused", code=result.code)
        setattr(request, REFUSAL_ATTR, result)
        raise PoppyAuthenticationFailed(result) from None
    if not isinstance(result, Principal):
        raise TypeError(f"The verifier returned {type(result).__name__}, not a Principal.")
    tracing.event("identity_checked", outcome="verified", client_id=result.client_id)
    return PoppyUser(result), result


def _challenge(request: Request) -> str:
    refusal = getattr(request, REFUSAL_ATTR, None)
    if isinstance(refusal, AuthRefusal):
        return refusal.www_authenticate
    return f'DPoP algs="{_algs()}"'


def refuse_unstorable_path(request: Request) -> None:
    """``400 invalid_request`` for a URL whose path parts hold what no resource can have (NUL,
    a lone surrogate): before a view's query or proposal sees it (PostgreSQL refuses NUL)."""
    kwargs = (getattr(request, "parser_context", None) or {}).get("kwargs") or {}
    if storable.problem(list(kwargs.values())) is not None:
        raise PoppyAPIException(
            PoppyError("invalid_request", "The URL's path holds U+0000 or a lone surrogate.")
        )


class DPoPAuthentication(BaseAuthentication):
    """Authenticates a company API's requests with ``POPPY["AUTHENTICATE"]``.

    ``Authorization: DPoP`` and ``Bearer`` go to the verifier, which accepts only a DPoP
    proof-bound token (a Session Token sent as Bearer is refused ``invalid_token``, as the
    endpoint refuses it). Requests with another scheme, or none, are left to the next
    authentication class; if none succeeds DRF answers 401 with this class's challenge.
    """

    def authenticate(self, request: Request) -> tuple[PoppyUser, Principal] | None:
        authorization = request.META.get("HTTP_AUTHORIZATION", "")
        if authorization.split(" ", 1)[0].lower() not in ("dpop", "bearer"):
            return None
        refuse_unstorable_path(request)
        return authenticate(request)

    def authenticate_header(self, request: Request) -> str:
        return _challenge(request)


class EndpointAuthentication(BaseAuthentication):
    """The conversation endpoint's authentication: every request goes to the verifier.

    Unlike :class:`DPoPAuthentication`, a request without credentials is not passed on: the
    verifier answers it (``401 invalid_token`` with its challenge). In any ``APIView`` its
    refusals are DRF exceptions: a plain view answers them as 401/403 JSON.
    """

    def authenticate(self, request: Request) -> tuple[PoppyUser, Principal]:
        return authenticate(request)

    def authenticate_header(self, request: Request) -> str:
        return _challenge(request)


def _algs() -> str:
    return " ".join(poppy_settings.token_options.dpop_algorithms)


def uses_poppy_authentication(view: Any) -> bool:
    """Whether a view authenticates with this module's classes (its challenge is ours)."""
    authenticators = getattr(getattr(view, "request", None), "authenticators", None) or ()
    return any(isinstance(a, DPoPAuthentication | EndpointAuthentication) for a in authenticators)


def missing_token() -> PoppyAuthenticationFailed:
    """The verifier's answer to a request without a Session Token: ``401 invalid_token``."""
    refusal = AuthRefusal(
        "invalid_token",
        "A DPoP-bound Session Token is required.",
        # No error in the challenge of a request that sent no credentials (RFC 6750 3.1).
        www_authenticate=f'DPoP algs="{_algs()}"',
    )
    return PoppyAuthenticationFailed(refusal)


def exception_handler(exc: Exception, context: dict[str, Any]) -> HttpResponseBase | None:
    """``REST_FRAMEWORK["EXCEPTION_HANDLER"]`` for a company's APIs: this app's refusals as
    the endpoint answers them (:func:`~poppy_django.api.wire_errors.wire_error_response`),
    everything else as DRF does.

    A request a Poppy-authenticated view refuses for want of credentials (DRF's
    ``NotAuthenticated``) is the verifier's ``401 invalid_token`` with the DPoP challenge.
    """
    view = context.get("view")
    if isinstance(exc, exceptions.NotAuthenticated) and uses_poppy_authentication(view):
        exc = missing_token()
    if isinstance(exc, PoppyError | PoppyAPIException):
        from rest_framework.views import set_rollback

        set_rollback()
        return wire_error_response(exc)
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, exceptions.AuthenticationFailed):
        response["Cache-Control"] = "no-store"
    return response
