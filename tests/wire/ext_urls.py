"""A URLconf routing a subclassed endpoint view (tests/wire/test_extension_points.py)."""

from __future__ import annotations

from poppy_django.urls import endpoint_urlpatterns
from tests.wire.test_extension_points import CountedMessagesView

urlpatterns = endpoint_urlpatterns(messages=CountedMessagesView)
