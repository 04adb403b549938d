from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import URLPattern, URLResolver, include, path

urlpatterns: list[URLPattern | URLResolver] = [
    path("admin/", admin.site.urls),
    path("", include("poppy_django.urls")),
    path("", include("poppy_django.wellknown_urls")),
    # The authorization server: OAuth metadata, token and revocation endpoints.
    path("", include("poppy_django.authority.urls")),
]
# The admin's and the desk's static files under uvicorn too (DEBUG only; production
# serves them with collectstatic behind the web server).
urlpatterns += staticfiles_urlpatterns()
