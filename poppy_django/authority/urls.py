"""The authority's routes; include at the site root: ``path("", include(...urls))``.

RFC 8414 puts the metadata at ``/.well-known/oauth-authorization-server`` followed by the
issuer's path, so the issuer's origin must serve this include at its root. Point
``LOGIN_URL`` at ``poppy_authority:login`` (or the project's own login page).
"""

from __future__ import annotations

from django.urls import path

from poppy_django.api.discovery import jwks_view
from poppy_django.authority import browser, mediated, metadata, pages, views

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
    path("oauth/device_authorization", views.device_authorization_view, name="device"),
    path("oauth/jwks.json", jwks_view, name="jwks"),
    path("oauth/authorize", pages.authorize_page, name="authorize"),
    path("device", pages.device_page, name="device-page"),
    path("account/agents", pages.connections_page, name="connections"),
    # The optional channels (POPPY_AUTHORITY: BROWSER_SESSIONS, MEDIATED_FIELDS); 404 when off.
    path("poppy/browser-session", browser.browser_session_view, name="browser-session"),
    path("poppy/sign-in", mediated.mediated_view, name="mediated"),
    path("poppy/sign-in/<str:sign_in_id>", mediated.mediated_code_view, name="mediated-code"),
    path("account/login", pages.LoginPage.as_view(), name="login"),
]
