"""The framework's floor for ``bench/latency.py``: the example project's URLs plus one bare
Django async view under the endpoint's path, returning a fixed JSON body (no database, no
cache, no authentication).

Served with ``DJANGO_SETTINGS_MODULE=bench.ceiling_settings`` by the same ASGI server, the
same ``example_project.asgi:application`` and the same middleware path as the endpoint, so
each route's figure can be set against what the stack costs before the endpoint does anything.
Bench-only: never part of the product.
"""

from django.http import HttpRequest, JsonResponse
from django.urls import URLPattern, URLResolver, include, path

from poppy_django.conf import endpoint_prefix

CEILING_PATH = f"{endpoint_prefix()}/ceiling"
BODY = {"conversation_id": "cnv_ceiling", "events": [], "cursor": "evt_ceiling"}


async def ceiling(request: HttpRequest) -> JsonResponse:
    return JsonResponse(BODY)


urlpatterns: list[URLPattern | URLResolver] = [
    path(CEILING_PATH.lstrip("/"), ceiling),
    path("", include("example_project.urls")),
]
