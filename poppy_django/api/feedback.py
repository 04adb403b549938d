"""Feedback (Poppy draft 0.2 §8): a personal agent reports a task it could not do here.

On with ``POPPY["FEEDBACK"]``: ``feedback.endpoint`` in ``poppy.json`` and
``POST /poppy/feedback`` (route ``poppy_django:feedback``). A report is
``{"kind", "task", "description"}`` sent with a Session Token (signed in or out, no scope
needed) and its DPoP proof; it is stored as a :class:`~poppy_django.models.FeedbackReport`
(``202``, no body) for staff to read in the admin. ``kind`` is ``missing`` today; kinds this
company does not know are stored as sent, as the protocol asks. Bounded: a task of at most
200 characters, a description of at most 2000, a body of at most 16 KiB, and
``FEEDBACK_REPORTS_PER_HOUR`` reports per pairwise User of a client, and
``FEEDBACK_CLIENT_REPORTS_PER_HOUR`` per client (then ``429 rate_limited``).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse
from django.views.decorators.csrf import csrf_exempt

from poppy_django.addresses import public_origin
from poppy_django.api.rest_framework import request_info
from poppy_django.conf import poppy_settings
from poppy_django.errors import PoppyError, error_response
from poppy_django.models import FeedbackReport
from poppy_django.store import windows
from poppy_django.verifier import Authenticate, AuthRefusal, Principal

MAX_BODY_BYTES = 16 * 1024
MAX_TASK = 200
MAX_DESCRIPTION = 2000
MAX_KIND = 64
WINDOW_SECONDS = 3600.0


def discovery_entry(request: HttpRequest | None) -> dict[str, str] | None:
    """``feedback`` of poppy.json when feedback is on."""
    if not poppy_settings.FEEDBACK:
        return None
    if request is not None:
        origin = public_origin(request)
    else:
        base_url = poppy_settings.BASE_URL
        if not base_url:
            raise ImproperlyConfigured('Without a request, feedback needs POPPY["BASE_URL"].')
        origin = base_url.rstrip("/")
    try:
        return {"endpoint": origin + reverse("poppy_django:feedback")}
    except NoReverseMatch:  # poppy_django.urls is not included: nothing to announce
        return None


def _text(body: dict[str, Any], name: str, limit: int) -> str:
    value = body.get(name)
    if (
        not isinstance(value, str)
        or not value.strip()
        or len(value) > limit
        or not _storable(value)
    ):
        raise PoppyError("invalid_request", f"{name} is a text of 1 to {limit} characters.")
    return value


def _storable(value: str) -> bool:
    """Text the database can keep: no NUL character, no lone surrogate."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _report(body: Any) -> dict[str, str]:
    if not isinstance(body, dict):
        raise PoppyError("invalid_request", "The report is a JSON object.")
    return {
        "kind": _text(body, "kind", MAX_KIND),
        "task": _text(body, "task", MAX_TASK),
        "description": _text(body, "description", MAX_DESCRIPTION),
    }


def _caller(request: HttpRequest) -> Principal:
    verifier: Authenticate | None = poppy_settings.AUTHENTICATE
    if verifier is None:
        raise PoppyError("not_implemented", "No token verifier is configured.")
    principal = verifier(request_info(request))
    if isinstance(principal, AuthRefusal):
        raise principal
    if not isinstance(principal, Principal):
        raise TypeError(f"The verifier returned {type(principal).__name__}, not a Principal.")
    return principal


def _admit(principal: Principal) -> None:
    """One more report of this client's User, and of this client, in the hour, or ``429
    rate_limited`` (counted per pairwise User, not per Session: a new Session resets
    nothing)."""
    limits = [
        (
            f"feedback:{principal.client_id}:{principal.user_id}",
            poppy_settings.FEEDBACK_REPORTS_PER_HOUR,
            "this User",
        ),
        (
            f"feedback-client:{principal.client_id}",
            poppy_settings.FEEDBACK_CLIENT_REPORTS_PER_HOUR,
            "this personal agent",
        ),
    ]
    for key, limit, whose in limits:
        if windows.count(key, seconds=WINDOW_SECONDS) > limit:
            wait = windows.retry_after(key, seconds=WINDOW_SECONDS)
            raise PoppyError(
                "rate_limited",
                f"Too many feedback reports from {whose}; retry later.",
                headers={"Retry-After": str(wait)},
            )


def record(principal: Principal, report: dict[str, str]) -> FeedbackReport:
    """Store one report of ``principal``'s Session."""
    return FeedbackReport.objects.create(
        **report,
        client_id=principal.client_id,
        user_id=principal.user_id,
        session_id=principal.session_id or "",
        signed_in=principal.signed_in,
    )


@csrf_exempt
def feedback_view(request: HttpRequest) -> HttpResponse:
    """``POST`` one feedback report: ``202`` stored, or a JSON error (nothing stored)."""
    if not poppy_settings.FEEDBACK:
        return error_response("not_found")
    if request.method != "POST":
        response = error_response("method_not_allowed")
        response["Allow"] = "POST"
        return response
    try:
        principal = _caller(request)  # before the body is read
        length = request.headers.get("Content-Length", "")
        too_large = length.isdigit() and int(length) > MAX_BODY_BYTES
        if too_large or len(request.body) > MAX_BODY_BYTES:
            raise PoppyError("request_too_large", "A report is at most 16 KiB.")
        if request.content_type != "application/json":
            raise PoppyError("invalid_request", "The report is application/json.")
        try:
            body = json.loads(request.body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise PoppyError("invalid_request", "The body is not JSON.") from None
        report = _report(body)
        _admit(principal)
        record(principal, report)
    except AuthRefusal as refusal:
        return refusal.response()
    except PoppyError as refusal:
        response = refusal.response()
        response["Cache-Control"] = "no-store"
        return response
    return HttpResponse(status=202)
