"""The desk's live streams: django-eventstream's browser streams of the desk's channels.

Every view is wrapped by the admin site (login, staff) and by :func:`desk_permission`; the
channel manager checks the permission again for each channel (:mod:`.channels`).
"""

from __future__ import annotations

from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponseBase
from django.views.decorators.http import require_GET
from django_eventstream.views import events as eventstream_events

from poppy_django.desk.context import present
from poppy_django.desk.permissions import desk_permission
from poppy_django.desk.state import conversation_or_404
from poppy_django.fanout import conversation_channel, desk_channel


@require_GET
@desk_permission
def queue_stream(request: HttpRequest, admin_site: AdminSite) -> HttpResponseBase:
    """The desk channel: every conversation's nudges (the queue re-reads its rows)."""
    present(request)
    response: HttpResponseBase = eventstream_events(request, channels=[desk_channel()])
    return response


@require_GET
@desk_permission
def conversation_stream(
    request: HttpRequest, conversation_id: str, admin_site: AdminSite
) -> HttpResponseBase:
    """The desk channel (nudges with request ids) and the conversation's (reply pieces)."""
    conversation = conversation_or_404(conversation_id)
    present(request)
    channels = [desk_channel(), conversation_channel(conversation.id)]
    response: HttpResponseBase = eventstream_events(request, channels=channels)
    return response
