"""Exceptions to the wire: the one translation of a failure into ``{"error": ...}``.

Every place that answers an exception as JSON calls :func:`wire_error_response`: the
endpoint's views (and a waiting read that fails), ``PoppyEndpointMiddleware`` for what a
middleware raises on the endpoint's paths, and DRF's ``exception_handler`` of
:mod:`poppy_django.api.rest_framework` for a company's own APIs. So a given exception is
answered the same way wherever it is raised, with a code from :data:`poppy_django.errors.ERRORS`
(or the code a company's own DRF exception names).
"""

from __future__ import annotations

import logging
import math
from typing import Any, cast

from django.core.exceptions import (
    BadRequest,
    DisallowedHost,
    PermissionDenied,
    RequestDataTooBig,
    SuspiciousOperation,
)
from django.core.signals import got_request_exception
from django.http import Http404, HttpRequest
from django.http.response import HttpResponseBase
from rest_framework import exceptions
from rest_framework.request import Request

from poppy_django.api.setup_problems import host_refusal, redis_hint, server_error_description
from poppy_django.errors import PoppyError, error_response
from poppy_django.observe.dependencies import RETRY_AFTER_SECONDS, Unavailable, unavailable
from poppy_django.observe.streaks import Streaks
from poppy_django.verifier import AuthRefusal

#: An unexpected exception answered ``500 server_error`` is logged here (docs/logging.md).
logger = logging.getLogger("poppy_django.views")
#: Requests that met a dependency out of reach, once a streak per dependency.
streaks = Streaks(logger, "requests reaching {}")


class PoppyAPIException(exceptions.APIException):
    """A refusal in the wire's shape as a DRF exception: a :class:`PoppyError`'s status, body
    (the ``detail``), ``WWW-Authenticate`` (``auth_header``) and extra headers."""

    def __init__(self, error: PoppyError) -> None:
        body: dict[str, Any] = {"error": error.code}
        if error.description:
            body["error_description"] = error.description
        body.update(error.extra)
        super().__init__(detail=body, code=error.code)
        self.status_code = error.status
        self.error = error
        if isinstance(error, AuthRefusal):
            self.auth_header = error.www_authenticate

    def response(self) -> HttpResponseBase:
        """The wire's JSON answer (what :meth:`PoppyError.response` writes)."""
        return self.error.response()


def wire_error_response(
    exc: Exception, request: HttpRequest | Request | None = None
) -> HttpResponseBase:
    """``exc`` as the wire's JSON error; anything unexpected is logged and a ``500``, but
    the database or Redis out of reach is ``503 temporarily_unavailable`` naming it.

    An unexpected exception also goes to Django's ``got_request_exception``, as Django's
    handler sends it for any exception a view or a middleware lets out (DRF lets a view's
    out): error reporters listen to it (Sentry's Django integration captures the exception
    being handled, with its stack), where the log line keeps only its withheld traceback.
    """
    if isinstance(exc, PoppyError | PoppyAPIException):
        return exc.response()
    if isinstance(exc, exceptions.Throttled):
        seconds = getattr(exc, "wait", None)
        wait = math.ceil(seconds) if seconds is not None else 1
        return error_response(
            "too_many_requests",
            "Too many requests: try again later.",
            headers={"Retry-After": str(max(1, wait))},
        )
    if isinstance(exc, exceptions.APIException):
        return _api_exception_response(exc)
    if isinstance(exc, Http404):
        return error_response("not_found", "There is nothing at this path.")
    if isinstance(exc, PermissionDenied):
        return error_response("forbidden")
    if isinstance(exc, RequestDataTooBig):
        return error_response("request_too_large")
    if isinstance(exc, DisallowedHost):
        return error_response("invalid_request", host_refusal(exc))
    if isinstance(exc, SuspiciousOperation | BadRequest):
        return error_response("invalid_request")
    django_request = cast(HttpRequest | None, getattr(request, "_request", request))
    method, path = (
        (django_request.method, django_request.path) if django_request is not None else ("?", "?")
    )
    out_of_reach = unavailable(exc)
    if out_of_reach is not None:
        return unavailable_response(out_of_reach, exc)
    got_request_exception.send(sender=None, request=django_request)
    hint = server_error_description(exc)
    logger.error("poppy: %s %s failed%s", method, path, f": {hint}" if hint else "", exc_info=exc)
    return error_response("server_error", hint)


def database_answers(**kwargs: Any) -> None:
    """Django connected to the database (``connection_created``): requests' streak of
    meeting it out of reach, if one is open, ends ("requests reaching database works again")."""
    streaks.succeeded("database")


def unavailable_response(out_of_reach: Unavailable, exc: BaseException) -> HttpResponseBase:
    """``503 temporarily_unavailable`` naming the dependency, with ``Retry-After``; the
    cause logged with the server's words once a streak (not a line per request)."""
    # The fix of a set-up mistake (REDIS_URL). Not the unmigrated database's: asking the
    # database which migrations it lacks would wait out the same outage a second time.
    hint = redis_hint(exc)
    streaks.failed(out_of_reach.dependency, exc, hint=hint)
    return error_response(
        "temporarily_unavailable",
        f"{out_of_reach.description()} {hint}" if hint else out_of_reach.description(),
        headers={"Retry-After": str(RETRY_AFTER_SECONDS), "Cache-Control": "no-store"},
    )


def _api_exception_response(exc: exceptions.APIException) -> HttpResponseBase:
    """A DRF exception (e.g. from a company's own permission class) in the wire's shape.

    Its code is the ``error`` (``PermissionDenied(detail, code="client_blocked")``), its
    detail the description, and its ``auth_header`` the ``WWW-Authenticate`` header.
    """
    detail = exc.detail
    if isinstance(detail, dict) and isinstance(detail.get("error"), str):
        code = str(detail["error"])
        description = detail.get("error_description")
    else:
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else exc.default_code
        description = detail if isinstance(detail, str) else None
    headers = {}
    auth_header = getattr(exc, "auth_header", None)
    if auth_header:
        headers["WWW-Authenticate"] = str(auth_header)
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        headers.setdefault("WWW-Authenticate", "DPoP")
    response = error_response(
        str(code),
        str(description) if description else None,
        status=exc.status_code,
        headers=headers,
    )
    if exc.status_code in (401, 403):
        response["Cache-Control"] = "no-store"
    return response
