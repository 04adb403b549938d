"""``/.well-known/`` routes: ``poppy.json`` and the local issuer's JWKS.

Include at the site root: ``path("", include("poppy_django.wellknown_urls"))``. The JWKS
answers 404 unless an issuer app in this project issues tokens (the authority, e.g. in its
development mode: ``POPPY["DEV_AUTHORITY"]``).
"""

from __future__ import annotations

from django.urls import path

from poppy_django.api.discovery import jwks_view, poppy_json_view

app_name = "poppy_wellknown"

urlpatterns = [
    path(".well-known/poppy.json", poppy_json_view, name="poppy-json"),
    path(".well-known/jwks.json", jwks_view, name="jwks"),
]
