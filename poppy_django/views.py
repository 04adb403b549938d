"""The public path of the conversation endpoint's DRF views, one per route, and the
``handler500`` that answers an outage 503.

The code lives in :mod:`poppy_django.api.views`; this module is the stable name to import or
to put in settings (docs/layout.md).
"""

from poppy_django.api.views import (
    CloseView,
    ConversationsView,
    EventsView,
    HandoffView,
    MessagesView,
    NotFoundView,
    server_error,
)

__all__ = [
    "CloseView",
    "ConversationsView",
    "EventsView",
    "HandoffView",
    "MessagesView",
    "NotFoundView",
    "server_error",
]
