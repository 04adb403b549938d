"""The website's page of an operation (Operations §4.4): the User confirms one exact revision.

``POPPY["OPERATIONS"]["PAGE_PATH"]`` names where it is; each operation's ``url`` points here.
A personal agent opens it in its own browser joined to the Session
(:mod:`poppy_django.authority.browser`, ``request.poppy``), so the page shows only that
Session's operations, as :mod:`poppy_django.operations.service` owns them: another
Session's, an unknown id or a browser that joined through no Session sees nothing (``404``
/ ``401``), a signed-out Session an account's operation ``403``.

The page shows the current revision's summary and terms and a form (CSRF-protected, Django's
own) that posts that ``revision`` back: confirming it is the same compare-and-set the
endpoint's confirm is (at most once, ``approved_by: user``); a stale revision is refused
(``409``, the new one shown) and nothing changes; a repeated post changes nothing. After a
confirm the page waits (holding no thread) up to ``CONFIRM_WAIT_SECONDS`` for the outcome,
then answers ``303`` to itself, so a reload never posts again.
"""

from __future__ import annotations

import re
from typing import Any, Protocol, runtime_checkable

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.csrf import csrf_protect

from poppy_django.conf import organization_name
from poppy_django.errors import PoppyError
from poppy_django.operations import service
from poppy_django.operations.models import Operation, OperationState
from poppy_django.operations.options import options
from poppy_django.operations.views import settled
from poppy_django.verifier import Principal

TEMPLATE = "poppy_django/operation_page.html"
#: A revision as the form posts it: ASCII digits only (``str.isdigit`` takes "²").
_REVISION = re.compile(r"[0-9]{1,9}")


class _See(HttpResponseRedirect):
    status_code = 303


@runtime_checkable
class BrowserVisit(Protocol):
    """What ``request.poppy`` holds for a browser that joined a Poppy Session (set by the
    issuer app's ``BrowserSessionMiddleware``; the core reads it without importing it)."""

    session_id: str
    client_id: str
    user_id: str
    signed_in: bool
    account_id: str | None
    scopes: frozenset[str]


def _principal(request: HttpRequest) -> Principal | None:
    """The Session this browser joined, as the service's owner check sees a caller."""
    visit = getattr(request, "poppy", None)
    if not isinstance(visit, BrowserVisit):
        return None  # not a personal agent's browser (or browser sessions are off)
    return Principal(
        client_id=visit.client_id,
        user_id=visit.user_id,
        account_id=visit.account_id,
        session_id=visit.session_id,
        signed_in=visit.signed_in,
        scopes=visit.scopes,
        token_type="browser",
    )


def _page(
    request: HttpRequest,
    status: int,
    *,
    operation: Operation | None = None,
    message: str = "",
) -> HttpResponse:
    context: dict[str, Any] = {
        "organization": organization_name(),
        "operation": operation,
        "message": message,
        "terms": sorted((operation.terms or {}).items()) if operation is not None else [],
        "confirmable": operation is not None and operation.state == OperationState.PROPOSED,
    }
    response = render(request, TEMPLATE, context, status=status)
    response["Cache-Control"] = "no-store"
    response["X-Frame-Options"] = "DENY"  # a confirm button is never framed by another site
    return response


def _refusal(request: HttpRequest, error: PoppyError, operation: Operation | None) -> HttpResponse:
    if error.code == service.NOT_FOUND:
        return _page(request, 404, message="There is nothing to show here.")
    if error.code == "sign_in_required":
        return _page(request, 403, message="Sign in to the account of this operation first.")
    if error.code == "terms_changed":
        return _page(
            request,
            409,
            operation=operation,
            message="This operation changed since it was shown: nothing was done. Review "
            "what it says now.",
        )
    return _page(request, error.status, operation=operation, message=error.description or "")


def _handle(request: HttpRequest, operation_id: str) -> tuple[HttpResponse, str | None]:
    """The page's answer, and the operation to wait for when this request confirmed it."""
    principal = _principal(request)
    if principal is None:
        return _page(
            request, 401, message="Your agent's session has ended. Ask it to open this again."
        ), None
    try:
        operation = service.read(principal, operation_id)
    except PoppyError as error:
        return _refusal(request, error, None), None
    if request.method != "POST":
        return _page(request, 200, operation=operation), None
    revision = request.POST.get("revision", "")
    action = request.POST.get("action", "confirm")
    try:
        if action == "cancel":
            service.cancel(principal, operation_id)
            return _See(request.path), None
        if action != "confirm" or not _REVISION.fullmatch(revision):
            return _page(
                request, 400, operation=operation, message="This form is not one this page sent."
            ), None
        before = operation.state
        done = service.confirm(
            principal, operation_id, {"revision": int(revision), "approved_by": "user"}
        )
    except PoppyError as error:
        return _refusal(request, error, service.read(principal, operation_id)), None
    confirmed_now = before == OperationState.PROPOSED and done.state == OperationState.IN_PROGRESS
    return _See(request.path), done.operation_id if confirmed_now else None


@csrf_protect
async def operation_page(request: HttpRequest, operation_id: str) -> HttpResponse:
    """``GET``/``POST {PAGE_PATH}/{operation_id}``: the operation, and its confirm form."""
    if request.method not in ("GET", "HEAD", "POST"):
        response = HttpResponse(status=405)
        response["Allow"] = "GET, POST"
        return response
    if not options().enabled or options().page_path is None:
        return await sync_to_async(_page)(request, 404, message="There is nothing to show here.")
    response, confirmed = await sync_to_async(_handle)(request, operation_id)
    wait = options().confirm_wait_seconds
    if confirmed is not None and wait > 0:
        await settled(confirmed, wait)  # the page it redirects to shows the outcome
    return response
