from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("poppy_django.urls")),
    path("", include("poppy_django.wellknown_urls")),
]
