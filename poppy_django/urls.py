"""``path("", include("poppy_django.urls"))``: the endpoint at ``POPPY["PATH"]``.

Every path below the endpoint that is not a route is ``404 not_found`` (JSON), and no path
redirects: a DPoP proof names one exact URL.
"""

from __future__ import annotations

import re

from django.urls import re_path

from poppy_django import views
from poppy_django.conf import endpoint_prefix

app_name = "poppy_django"

_base = re.escape(endpoint_prefix().lstrip("/"))
_id = r"(?P<conversation_id>[^/]+)"

urlpatterns = [
    re_path(rf"^{_base}$", views.start_conversation, name="conversations"),
    re_path(rf"^{_base}/{_id}/messages$", views.post_message, name="messages"),
    re_path(rf"^{_base}/{_id}/events$", views.events, name="events"),
    re_path(rf"^{_base}/{_id}/handoff$", views.handoff, name="handoff"),
    re_path(rf"^{_base}/{_id}/close$", views.close, name="close"),
    re_path(rf"^{_base}/.*$", views.not_found, name="not_found"),
]
