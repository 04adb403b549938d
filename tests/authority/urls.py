"""The example project's URLs plus a small orders API, the read the conformance suite probes.

The suite needs a company API that answers 401 for a bad token, 403 signed out, and 200
signed in with ``poppy:read``; the example project has no such API of its own (yet).
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.urls import path

from example_project.shop.models import Order
from example_project.urls import urlpatterns as example_urlpatterns
from poppy_django.auth import AuthRefusal, Principal
from poppy_django.conf import poppy_settings
from poppy_django.errors import error_response
from poppy_django.rest_framework import request_info


def orders(request: HttpRequest) -> JsonResponse:
    try:
        principal = poppy_settings.AUTHENTICATE(request_info(request))
        if isinstance(principal, AuthRefusal):
            raise principal
    except AuthRefusal as refusal:
        response = JsonResponse({"error": refusal.error}, status=refusal.status)
        response["WWW-Authenticate"] = refusal.www_authenticate
        return response
    assert isinstance(principal, Principal)
    if not principal.signed_in:
        return error_response("sign_in_required")
    if "poppy:read" not in principal.scopes:
        response = JsonResponse({"error": "insufficient_scope"}, status=403)
        response["WWW-Authenticate"] = 'DPoP error="insufficient_scope", scope="poppy:read"'
        return response
    rows = Order.objects.filter(account_id=principal.account_id).values("id", "status")
    return JsonResponse({"orders": list(rows)})


urlpatterns = [path("api/orders", orders), *example_urlpatterns]
