"""Acme's website as a personal agent's browser sees it (browser sessions, docs/channels.md).

``/account/session`` shows what the browser browses as: a person's own login, a Poppy
Session signed out (a visitor), or signed in with its scopes. ``/account/orders`` lists the
account's orders; an agent's browser sees it only when its Session has ``poppy:read``.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from example_project.shop.models import Order
from poppy_django.authority.grants import account_id_of
from poppy_django.authority.website import poppy_browser, poppy_scope_required


@never_cache
@require_safe
def session_page(request: HttpRequest) -> HttpResponse:
    """Who this browser is here, and the Poppy Session's sign-in state and scopes."""
    poppy = poppy_browser(request)
    scopes = sorted(poppy.scopes) if poppy else []
    return render(request, "shop/session.html", {"poppy": poppy, "scopes": scopes})


@never_cache
@require_safe
@login_required
@poppy_scope_required("poppy:read")
def orders_page(request: HttpRequest) -> HttpResponse:
    """The signed-in account's orders (a Poppy browser needs poppy:read)."""
    orders = Order.objects.filter(account_id=account_id_of(request.user))
    return render(request, "shop/orders.html", {"orders": orders})
