"""The example project plus a generic django_eventstream URL, as a project might mount it."""

from django.urls import include, path

from example_project.urls import urlpatterns as example_urlpatterns

urlpatterns = [path("events/", include("django_eventstream.urls")), *example_urlpatterns]
