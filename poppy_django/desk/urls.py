"""The desk's URLs, mounted under the Conversation admin (``.../conversation/desk/``).

The actions' URLs are ``<conversation page>action/<name>/`` and
``<conversation page>approvals/<record id>/<approve|reject>/``: the page's script builds them
from the conversation page's URL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.admin import AdminSite
from django.urls import URLPattern, path

from poppy_django.desk import views


def desk_urls(admin_site: AdminSite) -> list[URLPattern]:
    """URL patterns for ``ModelAdmin.get_urls()``: every view behind ``admin_view``."""

    def wrap(view: Callable[..., Any]) -> Callable[..., Any]:
        return admin_site.admin_view(view)

    site = {"admin_site": admin_site}
    return [
        path("desk/", wrap(views.queue_page), site, name=views.QUEUE),
        path("desk/stream/", wrap(views.queue_stream), site, name=views.QUEUE_STREAM),
        path("desk/alerts.json", wrap(views.alerts_json), site, name=views.ALERTS),
        path("desk/presence/", wrap(views.presence), site, name=views.PRESENCE),
        path(
            "desk/<str:conversation_id>/",
            wrap(views.conversation_page),
            site,
            name=views.CONVERSATION,
        ),
        path(
            "desk/<str:conversation_id>/events.json",
            wrap(views.events_json),
            site,
            name=views.EVENTS,
        ),
        path(
            "desk/<str:conversation_id>/canned.json",
            wrap(views.canned_json),
            site,
            name=views.CANNED,
        ),
        path(
            "desk/<str:conversation_id>/stream/",
            wrap(views.conversation_stream),
            site,
            name=views.CONVERSATION_STREAM,
        ),
        path(
            "desk/<str:conversation_id>/action/<slug:name>/",
            wrap(views.action),
            site,
            name=views.ACTION,
        ),
        path(
            "desk/<str:conversation_id>/approvals/<int:record_id>/<slug:decision>/",
            wrap(views.approval),
            site,
            name=views.APPROVAL,
        ),
    ]
