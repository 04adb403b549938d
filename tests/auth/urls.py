"""A URLconf for the auth tests: the endpoint, the well-known routes and a DRF view."""

from __future__ import annotations

from django.urls import include, path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from poppy_django.api.rest_framework import DPoPAuthentication


class WhoAmI(APIView):
    authentication_classes = [DPoPAuthentication]

    def get_exception_handler(self):  # noqa: ANN201 - DRF's signature
        from poppy_django.api.rest_framework import exception_handler

        return exception_handler

    def get(self, request: Request) -> Response:
        from rest_framework.exceptions import NotAuthenticated

        if not request.user.is_authenticated:
            raise NotAuthenticated()
        principal = request.auth
        return Response(
            {
                "user": str(request.user),
                "client_id": principal.client_id,
                "user_id": principal.user_id,
                "signed_in": principal.signed_in,
            }
        )


urlpatterns = [
    path("", include("poppy_django.urls")),
    path("", include("poppy_django.wellknown_urls")),
    path("api/whoami", WhoAmI.as_view()),
]
