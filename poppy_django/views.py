"""The public path of the conversation endpoint's DRF views, one per route.

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
)

__all__ = [
    "CloseView",
    "ConversationsView",
    "EventsView",
    "HandoffView",
    "MessagesView",
    "NotFoundView",
]
