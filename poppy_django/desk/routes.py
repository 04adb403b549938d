"""The desk's URL names (in the admin site's namespace) and how a view reverses one.

Its own module, so the views that link to each other and ``urls.py`` that names them share
one list without importing each other.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin import AdminSite
from django.urls import reverse

QUEUE = "poppy_django_conversation_desk"
QUEUE_STREAM = "poppy_django_conversation_desk_stream"
CONVERSATION = "poppy_django_conversation_desk_conversation"
EVENTS = "poppy_django_conversation_desk_events"
CONVERSATION_STREAM = "poppy_django_conversation_desk_conversation_stream"
ACTION = "poppy_django_conversation_desk_action"
ALERTS = "poppy_django_conversation_desk_alerts"
PRESENCE = "poppy_django_conversation_desk_presence"
CANNED = "poppy_django_conversation_desk_canned"
APPROVAL = "poppy_django_conversation_desk_approval"
REPORTS = "poppy_django_conversation_desk_reports"
REPORTS_CSV = "poppy_django_conversation_desk_reports_csv"
ACTIVITY = "poppy_django_conversation_desk_activity"


def url(admin_site: AdminSite, name: str, *args: Any) -> str:
    """The path of the desk's URL ``name`` on this admin site."""
    return reverse(f"{admin_site.name}:{name}", args=args, current_app=admin_site.name)
