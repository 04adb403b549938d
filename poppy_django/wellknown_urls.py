"""``/.well-known/`` routes: ``poppy.json`` and the development authority's JWKS.

Include at the site root: ``path("", include("poppy_django.wellknown_urls"))``. The JWKS
answers 404 unless ``POPPY["DEV_AUTHORITY"]`` is on.
"""

from __future__ import annotations

from django.urls import path

from poppy_django.auth.dev_authority import jwks_view
from poppy_django.discovery import poppy_json_view

app_name = "poppy_wellknown"

urlpatterns = [
    path(".well-known/poppy.json", poppy_json_view, name="poppy-json"),
    path(".well-known/jwks.json", jwks_view, name="jwks"),
]
