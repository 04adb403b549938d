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

from poppy_django.desk import actions, feeds, pages, routes, streams


def desk_urls(admin_site: AdminSite) -> list[URLPattern]:
    """URL patterns for ``ModelAdmin.get_urls()``: every view behind ``admin_view``."""

    def wrap(view: Callable[..., Any]) -> Callable[..., Any]:
        return admin_site.admin_view(view)

    site = {"admin_site": admin_site}
    return [
        path("desk/", wrap(pages.queue_page), site, name=routes.QUEUE),
        path("desk/stream/", wrap(streams.queue_stream), site, name=routes.QUEUE_STREAM),
        path("desk/alerts.json", wrap(feeds.alerts_json), site, name=routes.ALERTS),
        path("desk/presence/", wrap(actions.presence), site, name=routes.PRESENCE),
        path(
            "desk/<str:conversation_id>/",
            wrap(pages.conversation_page),
            site,
            name=routes.CONVERSATION,
        ),
        path(
            "desk/<str:conversation_id>/events.json",
            wrap(feeds.events_json),
            site,
            name=routes.EVENTS,
        ),
        path(
            "desk/<str:conversation_id>/canned.json",
            wrap(feeds.canned_json),
            site,
            name=routes.CANNED,
        ),
        path(
            "desk/<str:conversation_id>/stream/",
            wrap(streams.conversation_stream),
            site,
            name=routes.CONVERSATION_STREAM,
        ),
        path(
            "desk/<str:conversation_id>/action/<slug:name>/",
            wrap(actions.action),
            site,
            name=routes.ACTION,
        ),
        path(
            "desk/<str:conversation_id>/approvals/<int:record_id>/<slug:decision>/",
            wrap(actions.approval),
            site,
            name=routes.APPROVAL,
        ),
    ]
