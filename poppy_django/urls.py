"""``path("", include("poppy_django.urls"))``: the endpoint at ``POPPY["PATH"]``.

Every path below the endpoint that is not a route is ``404 not_found`` (JSON), and no path
redirects: a DPoP proof names one exact URL.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.urls import re_path

from poppy_django import views
from poppy_django.conf import DEFAULTS

app_name = "poppy_django"

# Read without validating the whole POPPY dict: URL checks import this module, and a typo
# elsewhere in POPPY must surface as check poppy_django.E004, not as an import error.
_configured = getattr(settings, "POPPY", None)
_path = (
    _configured.get("PATH", DEFAULTS["PATH"]) if isinstance(_configured, dict) else DEFAULTS["PATH"]
)
_base = re.escape(str(_path).strip("/"))
_id = r"(?P<conversation_id>[^/]+)"

urlpatterns = [
    re_path(rf"^{_base}$", views.start_conversation, name="conversations"),
    re_path(rf"^{_base}/{_id}/messages$", views.post_message, name="messages"),
    re_path(rf"^{_base}/{_id}/events$", views.events, name="events"),
    re_path(rf"^{_base}/{_id}/handoff$", views.handoff, name="handoff"),
    re_path(rf"^{_base}/{_id}/close$", views.close, name="close"),
    re_path(rf"^{_base}/.*$", views.not_found, name="not_found"),
]
