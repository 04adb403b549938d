from django.apps import apps
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import URLPattern, URLResolver, include, path, reverse_lazy
from drf_spectacular.views import SpectacularJSONAPIView

from example_project.shop import api
from poppy_django.authority.apps import serves_oauth
from poppy_django.schema import SPECTACULAR_SETTINGS

urlpatterns: list[URLPattern | URLResolver] = [
    path("admin/", admin.site.urls),
    path("", include("poppy_django.urls")),
    path("", include("poppy_django.wellknown_urls")),
    # The liveness and readiness probes (POPPY["LIVENESS_PATH"], POPPY["READINESS_PATH"]).
    path("", include("poppy_django.health_urls")),
    # Acme's own API for personal agents (Session Tokens), listed in poppy.json.
    path("api/orders", api.OrderList.as_view(), name="orders"),
    path("api/orders/<str:order_id>", api.OrderDetail.as_view(), name="order"),
    path("api/orders/<str:order_id>/cancel", api.CancelOrder.as_view(), name="order-cancel"),
    path("api/orders/<str:order_id>/receipt", api.SendReceipt.as_view(), name="order-receipt"),
    path("api/orders/<str:order_id>/refund", api.RefundOrder.as_view(), name="order-refund"),
    # The Operations extension's endpoint (on in POPPY["OPERATIONS"]).
    path("", include("poppy_django.operations.urls")),
    # The MCP server of the Company Agent's tools (on in POPPY["MCP"]).
    path("", include("poppy_django.mcp_urls")),
    # The OpenAPI 3 document of the conversation endpoint and the orders API, in JSON: what
    # poppy.json's "openapi" entry points to and personal agents parse (YAML was the default).
    path(
        "api/schema",
        SpectacularJSONAPIView.as_view(
            custom_settings={**SPECTACULAR_SETTINGS, "TITLE": "Acme Outfitters for personal agents"}
        ),
        name="schema",
    ),
]
if apps.is_installed("poppy_django.authority") and serves_oauth():
    # The authorization server: OAuth metadata, token and revocation endpoints, sign-in pages.
    urlpatterns.append(path("", include("poppy_django.authority.urls")))
    from example_project.shop import web

    # Acme's pages as a personal agent's browser session sees them (docs/channels.md).
    urlpatterns += [
        path("account/session", web.session_page, name="account-session"),
        path("account/orders", web.orders_page, name="account-orders"),
        # The account's own pages (Django's, login_required): a person's login only, never a
        # personal agent's browser; a password change ends the account's agent sign-ins.
        path(
            "account/password",
            auth_views.PasswordChangeView.as_view(
                success_url=reverse_lazy("account-password-done")
            ),
            name="account-password",
        ),
        path(
            "account/password/done",
            auth_views.PasswordChangeDoneView.as_view(),
            name="account-password-done",
        ),
    ]
# The admin's and the desk's static files under uvicorn too (DEBUG only; production
# serves them with collectstatic behind the web server).
urlpatterns += staticfiles_urlpatterns()
# A page that meets the database or Redis out of reach answers 503 with Retry-After (a page
# staff can read, or JSON), not Django's bare "Server Error (500)".
handler500 = "poppy_django.views.server_error"
