"""The pieces of projects that forgot something (tests/ops/test_checks.py, E012 and W009):
URLconfs without one of the app's includes, and ASGI applications with and without
``PoppyBodyLimit``."""

from __future__ import annotations

from typing import Any

from django.core.asgi import get_asgi_application
from django.urls import include, path

from poppy_django.asgi import PoppyBodyLimit


class OuterMiddleware:
    """An ASGI middleware of another library's, around the app (as OpenTelemetry's is)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


unwrapped = get_asgi_application()
wrapped_inside_another = OuterMiddleware(PoppyBodyLimit(get_asgi_application()))


class WithoutTheEndpoint:
    """A URLconf whose author forgot ``include("poppy_django.urls")``."""

    urlpatterns = [path("", include("poppy_django.wellknown_urls"))]


class WithoutPoppyJson:
    """A URLconf whose author forgot ``include("poppy_django.wellknown_urls")``."""

    urlpatterns = [path("", include("poppy_django.urls"))]
