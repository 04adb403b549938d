"""What the desk's pages re-read while open: a conversation's new events and panels, the
alerts every page shows, the canned replies of a conversation.

Every view is wrapped by the admin site (login, staff) and by :func:`desk_permission`.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin import AdminSite
from django.http import HttpRequest, JsonResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from poppy_django import service
from poppy_django.desk import alerts, decisions, parameters, routes, transcript
from poppy_django.desk.context import health_banner, is_developer
from poppy_django.desk.permissions import desk_permission
from poppy_django.desk.state import action_log, conversation_or_404, conversation_state
from poppy_django.errors import PoppyError
from poppy_django.models import Conversation, Event


@require_GET
@desk_permission
def events_json(request: HttpRequest, conversation_id: str, admin_site: AdminSite) -> JsonResponse:
    """Events after ``?after=<seq>`` and desk events after ``?desk_after=<id>``, with the
    panels they change: the page fills any gap the live stream left."""
    conversation = conversation_or_404(conversation_id)
    try:
        after = parameters.sequence_number(request, "after", "a sequence number")
        desk_after = parameters.sequence_number(request, "desk_after", "a desk event id")
    except PoppyError as exc:
        return exc.response()
    size = transcript.EVENTS_PAGE
    page = list(conversation.events.filter(seq__gt=after).order_by("seq")[: size + 1])
    return JsonResponse(
        {
            "conversation": conversation_state(conversation),
            "events": [_event(request, event) for event in page[:size]],
            "desk_events": _desk_events(request, conversation, desk_after),
            "has_more": len(page) > size,
            **_panels(request, conversation),
        }
    )


def _event(request: HttpRequest, event: Event) -> dict[str, Any]:
    entry = transcript.describe(event)
    return {
        "seq": entry.seq,
        "id": entry.event_id,
        "type": entry.type,
        "request_id": entry.request_id,
        "html": render_to_string("poppy_django/desk/event.html", {"entry": entry}, request=request),
    }


def _desk_events(
    request: HttpRequest, conversation: Conversation, after: int
) -> list[dict[str, Any]]:
    return [
        {
            "id": entry.id,
            "after_seq": entry.after_seq,
            "kind": entry.kind,
            "request_id": entry.request_id,
            "html": render_to_string(
                "poppy_django/desk/desk_event.html", {"item": entry}, request=request
            ),
        }
        for entry in map(
            transcript.describe_private, service.desk_events(conversation.id, after=after)
        )
    ]


def _panels(request: HttpRequest, conversation: Conversation) -> dict[str, str]:
    """The conversation page's panels as they are now, each re-rendered whole."""
    approvals_html = render_to_string(
        "poppy_django/desk/approvals.html",
        {
            "approvals": list(decisions.awaiting(conversation.id)),
            "running": list(decisions.running(conversation.id)),
        },
        request=request,
    )
    # The action log changes with the approvals (approved, then succeeded or failed): it is
    # re-rendered with them, or it would keep the status the page was loaded with.
    actions_html = render_to_string(
        "poppy_django/desk/action_log.html", {"actions": action_log(conversation.id)}
    )
    health_html = render_to_string(
        "poppy_django/desk/health.html", {**health_banner(), "developer": is_developer(request)}
    )
    return {
        "approvals_html": approvals_html,
        "actions_html": actions_html,
        "health_html": health_html,
    }


@require_GET
@desk_permission
def alerts_json(request: HttpRequest, admin_site: AdminSite) -> JsonResponse:
    """What every desk page alerts on: how many conversations wait, in the queue's fair
    order (re-read when the live channel nudges, and every 30 s while a desk page is open,
    which keeps the staff member present), which of them alert this staff member, and their
    own presence."""
    me = request.user.get_username()
    service.staff_seen(me)
    found = alerts.summary()
    presence = service.staff_status(me)
    teams = service.teams_of(me)
    reading = alerts.reader(me, available=presence.available, teams=teams)
    return JsonResponse(
        {
            "me": {"away": presence.away, "available": presence.available, "teams": teams},
            "office_open": service.office_open(),
            "waiting": found.count,
            "conversations": [
                {
                    "id": item.id,
                    "who": item.who,
                    "said": item.said,
                    "since": item.since,
                    "assignee": item.assignee,
                    "team": item.team,
                    "warn_in": item.warn_in,
                    "due_in": item.due_in,
                    # Whether this page raises an alert for it (else: the count only).
                    "alert": reading.alerted(item),
                    "url": routes.url(admin_site, routes.CONVERSATION, item.id),
                }
                for item in found.waiting
            ],
        }
    )


@require_GET
@desk_permission
def canned_json(request: HttpRequest, conversation_id: str, admin_site: AdminSite) -> JsonResponse:
    """The canned replies, their placeholders filled for this conversation."""
    try:
        replies = service.canned_replies(conversation_id)
    except PoppyError as exc:
        return exc.response()
    return JsonResponse(
        {"replies": [{"shortcut": r.shortcut, "title": r.title, "text": r.text} for r in replies]}
    )
