"""The User's pages: log in, approve a Device Sign-In, disconnect an agent.

Plain Django views with the project's own authentication (``login_required``), CSRF and
templates (``poppy_authority/*.html``, overridable like any app template).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from poppy_django.authority import device, grants
from poppy_django.authority.metadata import scopes
from poppy_django.authority.models import Grant
from poppy_django.conf import poppy_settings


def _organization() -> str:
    organization = (poppy_settings.DISCOVERY or {}).get("ORGANIZATION") or {}
    return str(organization.get("name") or "this company")


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def device_page(request: HttpRequest) -> HttpResponse:
    """Enter the code a personal agent showed, then approve (some) scopes or deny."""
    code = (request.POST.get("user_code") or request.GET.get("user_code") or "").strip()
    record = device.pending(code) if code else None
    context: dict[str, Any] = {"organization": _organization(), "user_code": code}
    if record is None:
        if code:
            context["error"] = "That code is unknown or has expired."
        return render(request, "poppy_authority/device.html", context, status=200)
    decision = request.POST.get("decision") if request.method == "POST" else None
    if decision in ("approve", "deny"):
        approved = request.POST.getlist("scope") if decision == "approve" else []
        account = grants.account_id_of(request.user) if decision == "approve" else None
        device.decide(record, account, approved)
        return render(
            request,
            "poppy_authority/device_done.html",
            {**context, "approved": bool(account and approved), "client": record.client},
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
        client_id = request.POST.get("client_id", "")
        count = grants.revoke_grants(active.filter(client__client_id=client_id))
        if count:
            messages.success(request, "The agent is disconnected: it is signed out everywhere.")
        return HttpResponseRedirect(reverse("poppy_authority:connections"))
    clients: dict[str, list[Grant]] = {}
    for grant in active.order_by("created_at"):
        clients.setdefault(grant.client.client_id, []).append(grant)
    return render(
        request,
        "poppy_authority/connections.html",
        {"organization": _organization(), "clients": clients},
    )
