"""The desk's URLs, mounted under the Conversation admin (``.../conversation/desk/``).

The actions' URLs are ``<conversation page>action/<name>/`` and
``<conversation page>approvals/<record id>/<approve|reject>/``: the page's script builds them
from the conversation page's URL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.admin import AdminSite
from django.urls import URLPattern, path, register_converter

from poppy_django import ids
from poppy_django.desk import actions, colleagues, feeds, pages, report_pages, routes, streams


class ConversationId:
    """A path part that can be a conversation id (the wire's id alphabet, ``poppy_django.ids``).

    Anything else (U+0000, which PostgreSQL refuses in text with an error, or any character
    no id holds) matches no conversation's route: the desk's 404, never a query.
    """

    regex = ids.ID_PATTERN.pattern

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(ConversationId, "conversation_id")


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
        path("desk/reports/", wrap(report_pages.reports_page), site, name=routes.REPORTS),
        path("desk/reports.csv", wrap(report_pages.reports_csv), site, name=routes.REPORTS_CSV),
        path(
            "desk/<conversation_id:conversation_id>/",
            wrap(pages.conversation_page),
            site,
            name=routes.CONVERSATION,
        ),
        path(
            "desk/<conversation_id:conversation_id>/events.json",
            wrap(feeds.events_json),
            site,
            name=routes.EVENTS,
        ),
        path(
            "desk/<conversation_id:conversation_id>/canned.json",
            wrap(feeds.canned_json),
            site,
            name=routes.CANNED,
        ),
        path(
            "desk/<conversation_id:conversation_id>/stream/",
            wrap(streams.conversation_stream),
            site,
            name=routes.CONVERSATION_STREAM,
        ),
        path(
            "desk/<conversation_id:conversation_id>/action/<slug:name>/",
            wrap(actions.action),
            site,
            name=routes.ACTION,
        ),
        path(
            "desk/<conversation_id:conversation_id>/activity/",
            wrap(colleagues.activity),
            site,
            name=routes.ACTIVITY,
        ),
        path(
            "desk/<conversation_id:conversation_id>/approvals/<int:record_id>/<slug:decision>/",
            wrap(actions.approval),
            site,
            name=routes.APPROVAL,
        ),
        # Anything else under desk/ (an id no conversation has) is the desk's 404, never the
        # Conversation admin's change view below, which would take it for an object id.
        path("desk/<path:rest>", wrap(pages.not_found), site),
    ]
