"""``path("", include("poppy_django.urls"))``: the endpoint at ``POPPY["PATH"]``.

Every path below the endpoint that is not a route is ``404 not_found`` (JSON), and no path
redirects: a DPoP proof names one exact URL.
"""

from __future__ import annotations

import re

from django.urls import URLPattern, path, re_path

from poppy_django.api import feedback, views
from poppy_django.conf import endpoint_prefix

app_name = "poppy_django"

_base = re.escape(endpoint_prefix().lstrip("/"))
_id = r"(?P<conversation_id>[^/]+)"


def endpoint_urlpatterns(**view_classes: type[views.EndpointView]) -> list[URLPattern]:
    """The endpoint's routes, with any view replaced by a subclass (keyword: route name).

    ``endpoint_urlpatterns(messages=MyMessagesView)`` routes ``MyMessagesView`` at
    ``{endpoint}/{id}/messages`` and the app's views elsewhere.
    """
    chosen = {**_VIEWS, **view_classes}
    unknown = sorted(set(view_classes) - set(_VIEWS))
    if unknown:
        raise ValueError(
            f"Unknown endpoint route(s): {', '.join(unknown)}; known: {', '.join(_VIEWS)}"
        )
    return [
        re_path(rf"^{_base}{route}$", chosen[name].as_view(), name=name)  # type: ignore[arg-type]
        for name, route in _ROUTES.items()
    ]


_VIEWS: dict[str, type[views.EndpointView]] = {
    "conversations": views.ConversationsView,
    "messages": views.MessagesView,
    "events": views.EventsView,
    "handoff": views.HandoffView,
    "close": views.CloseView,
    "not_found": views.NotFoundView,
}
_ROUTES = {
    "conversations": "",
    "messages": f"/{_id}/messages",
    "events": f"/{_id}/events",
    "handoff": f"/{_id}/handoff",
    "close": f"/{_id}/close",
    "not_found": "/.*",
}

urlpatterns = [
    *endpoint_urlpatterns(),
    # Feedback reports (POPPY["FEEDBACK"]; 404 when off).
    path("poppy/feedback", feedback.feedback_view, name="feedback"),
]
