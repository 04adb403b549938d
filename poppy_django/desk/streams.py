"""The desk's live streams: django-eventstream's browser streams of the desk's channels.

Every view is wrapped by the admin site (login, staff) and by :func:`desk_permission`; the
channel manager checks the permission again for each channel (:mod:`.channels`). Each
stream is its staff member's live desk while it is open (:mod:`poppy_django.staff.connections`):
written down as it opens, renewed as its keep-alives pass, removed as it closes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from django.views.decorators.http import require_GET
from django_eventstream.views import events as eventstream_events

from poppy_django.desk.permissions import desk_permission
from poppy_django.desk.state import conversation_or_404
from poppy_django.fanout import conversation_channel, desk_channel
from poppy_django.staff import connections


def _live_desk(request: HttpRequest, channels: list[str]) -> HttpResponseBase:
    """The stream of ``channels``, kept as the staff member's live desk while it is open."""
    response: HttpResponseBase = eventstream_events(request, channels=channels)
    if not isinstance(response, StreamingHttpResponse):
        return response  # refused: no stream, no live desk
    connection_id = connections.opened(request.user.get_username())
    content = response.streaming_content
    if isinstance(content, AsyncIterator):
        response.streaming_content = _kept_async(content, connection_id)
    else:
        response.streaming_content = _kept(content, connection_id)
    return response


async def _kept_async(chunks: AsyncIterator[Any], connection_id: uuid.UUID) -> AsyncIterator[Any]:
    """``chunks``, renewing the connection as they pass and closing it however the stream
    ends (under ASGI a client gone away cancels the response: the ``finally`` runs)."""
    renewed = time.monotonic()
    try:
        async for chunk in chunks:
            if time.monotonic() - renewed >= connections.RENEW_EVERY_SECONDS:
                renewed = time.monotonic()
                await sync_to_async(connections.renewed)(connection_id)
            yield chunk
    finally:
        await sync_to_async(connections.closed)(connection_id)


def _kept(chunks: Iterator[Any], connection_id: uuid.UUID) -> Iterator[Any]:
    """:func:`_kept_async` for a server that iterates the stream synchronously (WSGI)."""
    renewed = time.monotonic()
    try:
        for chunk in chunks:
            if time.monotonic() - renewed >= connections.RENEW_EVERY_SECONDS:
                renewed = time.monotonic()
                connections.renewed(connection_id)
            yield chunk
    finally:
        connections.closed(connection_id)


@require_GET
@desk_permission
def queue_stream(request: HttpRequest, admin_site: AdminSite) -> HttpResponseBase:
    """The desk channel: every conversation's nudges (the queue re-reads its rows)."""
    return _live_desk(request, [desk_channel()])


@require_GET
@desk_permission
def conversation_stream(
    request: HttpRequest, conversation_id: str, admin_site: AdminSite
) -> HttpResponseBase:
    """The desk channel (nudges with request ids) and the conversation's (reply pieces)."""
    conversation = conversation_or_404(conversation_id)
    return _live_desk(request, [desk_channel(), conversation_channel(conversation.id)])
