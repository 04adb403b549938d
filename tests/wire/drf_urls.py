"""A URLconf for tests/wire/test_drf_idioms.py: subclassed views setting DRF's class
attributes, and a plain APIView using the endpoint's authentication class."""

from __future__ import annotations

from django.urls import path

from poppy_django.urls import endpoint_urlpatterns
from tests.wire.test_drf_idioms import GuardedMessagesView, PlainView

urlpatterns = [
    *endpoint_urlpatterns(messages=GuardedMessagesView),
    path("plain", PlainView.as_view()),
]
