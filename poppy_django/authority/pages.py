"""The User's pages: log in, approve a Device or Direct Sign-In, disconnect an agent.

Plain Django views with the project's own authentication (``login_required``), CSRF and
templates (``poppy_authority/*.html``, overridable like any app template).
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import urlencode

from authlib.oauth2 import OAuth2Error
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from poppy_django.authority import device, direct, grants, metadata
from poppy_django.authority.clients import client_for, normal_client_id, remember
from poppy_django.authority.metadata import scopes
from poppy_django.authority.models import Grant
from poppy_django.conf import organization_name

logger = logging.getLogger("poppy_django.authority")


class LoginPage(LoginView):
    """Django's login view, on a page that names the company, as the consent page does."""

    template_name = "poppy_authority/login.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "organization": organization_name()}


#: An S256 code challenge: base64url of a SHA-256 digest (RFC 7636 §4.2), 43 characters.
_S256_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def device_page(request: HttpRequest) -> HttpResponse:
    """Enter the code a personal agent showed, then approve (some) scopes or deny.

    Wrong codes are counted per user and per client address (RFC 8628 §5.1): past the
    limit the page takes no code for a while, so user codes cannot be guessed through it.
    """
    code = (request.POST.get("user_code") or request.GET.get("user_code") or "").strip()
    context: dict[str, Any] = {"organization": organization_name(), "user_code": code}
    guesser = device.Guesser(str(request.user.pk), request.META.get("REMOTE_ADDR", ""))
    if code and guesser.over_limit():
        context["error"] = "Too many wrong codes. Try again later."
        return render(request, "poppy_authority/device.html", context, status=429)
    record = device.pending(code) if code else None
    if record is None:
        if code:
            guesser.wrong_code()
            context["error"] = "That code is unknown or has expired."
        return render(request, "poppy_authority/device.html", context, status=200)
    decision = request.POST.get("decision") if request.method == "POST" else None
    if decision in ("approve", "deny"):
        approved = request.POST.getlist("scope") if decision == "approve" else []
        approver = request.user if decision == "approve" else None
        device.decide(record, approver, approved)
        return render(
            request,
            "poppy_authority/device_done.html",
            {**context, "approved": not record.denied, "client": record.client},
        )
    offered = scopes()
    context.update(
        client=record.client,
        scopes=[(name, offered.get(name, name)) for name in record.scope.split()],
    )
    return render(request, "poppy_authority/consent.html", context)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def connections_page(request: HttpRequest) -> HttpResponse:
    """The agents signed in to this account, each with "disconnect this agent"."""
    account = grants.account_id_of(request.user)
    active = Grant.objects.filter(account_id=account, revoked_at=None).select_related("client")
    if request.method == "POST":
        client_id = normal_client_id(request.POST.get("client_id", ""))
        count = grants.revoke_grants(active.filter(client__client_id=client_id)) if client_id else 0
        if count:
            messages.success(request, "The agent is disconnected: it is signed out everywhere.")
        return HttpResponseRedirect(reverse("poppy_authority:connections"))
    clients: dict[str, list[Grant]] = {}
    for grant in active.order_by("created_at"):
        clients.setdefault(grant.client.client_id, []).append(grant)
    return render(
        request,
        "poppy_authority/connections.html",
        {"organization": organization_name(), "clients": clients},
    )


def _redirect_with(redirect_uri: str, **params: str) -> HttpResponseRedirect:
    """Back to the client's registered redirect URI, with the issuer named (RFC 9207)."""
    separator = "&" if "?" in redirect_uri else "?"
    query = urlencode({**params, "iss": metadata.issuer()})
    return HttpResponseRedirect(f"{redirect_uri}{separator}{query}")


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def authorize_page(request: HttpRequest) -> HttpResponse:
    """Direct Sign-In's authorization page: check the request, then approve or deny."""
    params = request.GET
    context: dict[str, Any] = {"organization": organization_name()}
    try:
        client = client_for(params.get("client_id"))
        redirect_uri = direct.redirect_uri_of(client, params.get("redirect_uri"))
    except (OAuth2Error, direct.InvalidAuthorizationRequest):
        context["error"] = "This sign-in link is not valid."
        return render(request, "poppy_authority/authorize.html", context, status=400)
    state = params.get("state", "")
    if params.get("response_type") != "code":
        return _redirect_with(redirect_uri, error="unsupported_response_type", state=state)
    challenge = params.get("code_challenge", "")
    if params.get("code_challenge_method") != "S256" or not _S256_CHALLENGE.fullmatch(challenge):
        return _redirect_with(redirect_uri, error="invalid_request", state=state)
    try:
        wanted = device.requested_scope(params.get("scope"))
    except OAuth2Error:
        return _redirect_with(redirect_uri, error="invalid_scope", state=state)
    if request.method == "POST":
        approved = [s for s in wanted.split() if s in request.POST.getlist("scope")]
        if request.POST.get("decision") != "approve" or not approved:
            return _redirect_with(redirect_uri, error="access_denied", state=state)
        # The User approved the client: it is stored from here on.
        code = direct.issue_code(
            remember(client),
            redirect_uri,
            challenge,
            request.user,
            " ".join(approved),
        )
        return _redirect_with(redirect_uri, code=code, state=state)
    offered = scopes()
    context.update(
        client=client, scopes=[(name, offered.get(name, name)) for name in wanted.split()]
    )
    return render(request, "poppy_authority/authorize.html", context)
