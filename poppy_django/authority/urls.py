"""The authority's routes; include at the site root: ``path("", include(...urls))``.

RFC 8414 puts the metadata at ``/.well-known/oauth-authorization-server`` followed by the
issuer's path, so the issuer's origin must serve this include at its root.
"""

from __future__ import annotations

from django.urls import path

from poppy_django.authority import metadata, views

app_name = "poppy_authority"

urlpatterns = [
    path(".well-known/oauth-authorization-server", metadata.metadata_view, name="metadata"),
    path(
        ".well-known/oauth-authorization-server/<path:issuer_path>",
        metadata.metadata_view,
        name="metadata-path",
    ),
    path("oauth/token", views.token_view, name="token"),
    path("oauth/revoke", views.revocation_view, name="revoke"),
    path("oauth/jwks.json", views.jwks_view, name="jwks"),
]
