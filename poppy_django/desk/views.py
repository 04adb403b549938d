"""The desk's pages, its JSON, its live stream and its actions.

Every view is wrapped by the admin site (login, staff) and by :func:`desk_permission`.
Actions answer JSON: the browser sends a ``request_id`` it made, the service echoes it in
``Event.meta`` and on the desk's live channel, and the page settles its pending row by it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.contrib.admin import AdminSite
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_eventstream.views import events as eventstream_events

from poppy_django import ids, service
from poppy_django.conf import poppy_settings
from poppy_django.desk import alerts, decisions, queue, transcript, wording
from poppy_django.desk.permissions import desk_permission
from poppy_django.engine.broker_health import health
from poppy_django.errors import PoppyError, error_response
from poppy_django.fanout import conversation_channel, desk_channel
from poppy_django.models import (
    ActionRecord,
    ActionStatus,
    Conversation,
    DeskEvent,
    Event,
    Status,
)
from poppy_django.store import event_log

#: A browser-made request id (``crypto.randomUUID()`` or the page's fallback).
REQUEST_ID = re.compile(r"[A-Za-z0-9_-]{8,64}")
#: A sequence number as ``?after=`` takes it (a bigint column holds 18 digits safely).
SEQ = re.compile(r"[0-9]{1,18}")
#: Events per page of the transcript JSON.
EVENTS_PAGE = 200
#: The longest reply or reason a person may send.
MAX_TEXT = 10_000

#: URL names (in the admin site's namespace).
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


def _url(admin_site: AdminSite, name: str, *args: Any) -> str:
    return reverse(f"{admin_site.name}:{name}", args=args, current_app=admin_site.name)


def _present(request: HttpRequest) -> None:
    """A desk page of this staff member's is open: they count as available (presence)."""
    service.staff_seen(request.user.get_username())


def _context(request: HttpRequest, admin_site: AdminSite, title: str) -> dict[str, Any]:
    _present(request)
    return {
        **admin_site.each_context(request),
        # The desk needs the page's width (the queue's columns, the transcript beside the
        # conversation's panel), not the admin's model list beside it.
        "is_nav_sidebar_enabled": False,
        "title": title,
        "opts": Conversation._meta,
        "queue_url": _url(admin_site, QUEUE),
        "alerts_url": _url(admin_site, ALERTS),
        "presence_url": _url(admin_site, PRESENCE),
        "presence": service.staff_status(request.user.get_username()),
        "developer": is_developer(request),
        **_health(),
    }


def is_developer(request: HttpRequest) -> bool:
    """Whether the page shows what only a developer reads (worker commands, request ids,
    the diagnostics panel): superusers only; staff read the desk in staff's words."""
    return bool(getattr(request.user, "is_superuser", False))


def _health() -> dict[str, Any]:
    """What keeps turns from running, for the desk's banner: conversations no worker took
    up (no worker running?) and this process failing to reach its broker."""
    problem = health.problem()
    return {
        "stalled_count": wording.stalled_count(),
        "lease_seconds": f"{poppy_settings.LEASE_SECONDS:g}",
        "broker_problem": (
            {
                "broker": problem.broker,
                "since": wording.when(datetime.fromtimestamp(problem.since, tz=UTC)),
                "consequence": problem.consequence,
            }
            if problem
            else None
        ),
    }


def _conversation_or_404(conversation_id: str) -> Conversation:
    try:
        return Conversation.objects.get(pk=conversation_id)
    except Conversation.DoesNotExist as exc:
        raise Http404("No such conversation.") from exc


def state(conversation: Conversation) -> dict[str, Any]:
    """The conversation as the desk shows it (staff-only fields included): the page's
    buttons and notices follow this, never what the page guesses."""
    requested = conversation.handoff_requested_at
    return {
        "id": conversation.id,
        "status": conversation.status,
        "status_label": wording.status_label(conversation.status, conversation.responder),
        "stalled": wording.stalled(conversation.id),
        "responder": conversation.responder,
        # Whom it is with: its holder, or the teammate it is assigned to while it waits.
        "assignee": service.holder(conversation),
        "why": wording.why(conversation),
        "handoff_requested_at": requested.isoformat() if requested else None,
        "handoff_requested_display": wording.when(requested),
        "last_seq": conversation.last_seq,
        "direct": conversation.is_direct,
        "closed": conversation.status == Status.CLOSED,
    }


# Pages ------------------------------------------------------------------------------------


@require_GET
@desk_permission
def queue_page(request: HttpRequest, admin_site: AdminSite) -> HttpResponse:
    """The queue; ``?partial=rows`` answers only the rows (the page re-fetches them live)."""
    chosen = queue.chosen_filter(request.GET.get("status"))
    text = request.GET.get("q", "")
    me = request.user.get_username()
    rows = list(queue.conversations(chosen.key, text, me=me)[: queue.LIMIT])
    # A conversation's page is ``<queue url><id>/`` (see urls.py).
    context: dict[str, Any] = {
        "rows": rows,
        "desk_url": _url(admin_site, QUEUE),
        "lease_seconds": f"{poppy_settings.LEASE_SECONDS:g}",
    }
    if request.GET.get("partial") == "rows":
        return render(request, "poppy_django/desk/queue_rows.html", context)
    counts = queue.counts(me)
    context.update(_context(request, admin_site, "Support desk"))
    context.update(
        {
            "filters": [(item, counts[item.key]) for item in queue.FILTERS],
            "chosen": chosen,
            "q": text,
            "stream_url": _url(admin_site, QUEUE_STREAM),
            "limit": queue.LIMIT,
        }
    )
    return render(request, "poppy_django/desk/queue.html", context)


@require_GET
@desk_permission
def conversation_page(
    request: HttpRequest, conversation_id: str, admin_site: AdminSite
) -> HttpResponse:
    """One conversation: its live transcript, its state, what a person can do.

    The transcript shows one page of events: the latest, or those before ``?before=<seq>``
    (or around the linked ``?event=<id>``), with links to the earlier and the latest ones.
    """
    conversation = _conversation_or_404(conversation_id)
    highlight = request.GET.get("event", "")
    before = _window_end(request, conversation, highlight)
    newest_first = conversation.events.order_by("-seq")
    if before is not None:
        newest_first = newest_first.filter(seq__lt=before)
    window = list(newest_first[: EVENTS_PAGE + 1])
    shown = window[:EVENTS_PAGE][::-1]
    page_url = _url(admin_site, CONVERSATION, conversation.id)
    title = f"Conversation with {wording.who(conversation.account_id, conversation.user_id)}"
    context = _context(request, admin_site, title)
    private = service.desk_events(conversation.id)
    me = request.user.get_username()
    context.update(
        conversation=conversation,
        state=state(conversation),
        entries=_with_private(shown, private, latest=before is None),
        last_desk_event=private[-1].pk if private else 0,
        teammates=[mate for mate in service.team() if mate.username != me],
        canned_url=_url(admin_site, CANNED, conversation.id),
        earlier_url=f"{page_url}?before={shown[0].seq}" if len(window) > EVENTS_PAGE else "",
        latest_url=page_url if shown and shown[-1].seq < conversation.last_seq else "",
        highlight=highlight,
        approvals=list(decisions.awaiting(conversation.id)),
        running=list(decisions.running(conversation.id)),
        actions=_action_log(conversation.id),
        directs=list(conversation.direct_conversations.order_by("created_at")),
        page_url=page_url,
        stream_url=_url(admin_site, CONVERSATION_STREAM, conversation.id),
        events_url=_url(admin_site, EVENTS, conversation.id),
    )
    return render(request, "poppy_django/desk/conversation.html", context)


def _with_private(
    shown: list[Event], private: list[DeskEvent], *, latest: bool
) -> list[transcript.Entry | transcript.PrivateEntry]:
    """The page's events with the desk's own rows (notes, take-overs, assignments) each
    after the event it was written after, those of this page's span only."""
    rows: list[tuple[tuple[int, int, int], transcript.Entry | transcript.PrivateEntry]] = [
        ((event.seq, 0, 0), transcript.describe(event)) for event in shown
    ]
    first = shown[0].seq if shown else 0
    last = shown[-1].seq if shown and not latest else None
    for item in private:
        if item.after_seq >= first and (last is None or item.after_seq <= last):
            rows.append(((item.after_seq, 1, item.pk), transcript.describe_private(item)))
    return [row for _, row in sorted(rows, key=lambda pair: pair[0])]


def _window_end(request: HttpRequest, conversation: Conversation, highlight: str) -> int | None:
    """The seq the transcript page ends before: ``?before``, else past an older linked event."""
    before = request.GET.get("before", "")
    if before.isdigit():
        return int(before)
    seq = ids.parse_cursor(conversation.id, highlight) if highlight else None
    if seq is not None and seq <= conversation.last_seq - EVENTS_PAGE:
        return seq + 1  # the linked event is older than the latest page: end the page on it
    return None


@require_GET
@desk_permission
def events_json(request: HttpRequest, conversation_id: str, admin_site: AdminSite) -> JsonResponse:
    """Events after ``?after=<seq>``: the page fills any gap the live stream left."""
    conversation = _conversation_or_404(conversation_id)
    after_text = request.GET.get("after", "0")
    # ASCII digits only, and no longer than a sequence number can be: ``str.isdigit`` also
    # accepts "²" and "٣", and a 5,000-digit number is past what int() or the column take.
    if not SEQ.fullmatch(after_text):
        return error_response("invalid_request", "after must be a sequence number.")
    after = int(after_text)
    desk_after_text = request.GET.get("desk_after", "0")
    if not SEQ.fullmatch(desk_after_text):
        return error_response("invalid_request", "desk_after must be a desk event id.")
    page = list(conversation.events.filter(seq__gt=after).order_by("seq")[: EVENTS_PAGE + 1])
    events = []
    for event in page[:EVENTS_PAGE]:
        entry = transcript.describe(event)
        events.append(
            {
                "seq": entry.seq,
                "id": entry.event_id,
                "type": entry.type,
                "request_id": entry.request_id,
                "html": render_to_string(
                    "poppy_django/desk/event.html", {"entry": entry}, request=request
                ),
            }
        )
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
        "poppy_django/desk/action_log.html", {"actions": _action_log(conversation.id)}
    )
    health_html = render_to_string(
        "poppy_django/desk/health.html", {**_health(), "developer": is_developer(request)}
    )
    private = [
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
            transcript.describe_private,
            service.desk_events(conversation.id, after=int(desk_after_text)),
        )
    ]
    return JsonResponse(
        {
            "conversation": state(conversation),
            "events": events,
            "desk_events": private,
            "has_more": len(page) > EVENTS_PAGE,
            "approvals_html": approvals_html,
            "actions_html": actions_html,
            "health_html": health_html,
        }
    )


def _action_log(conversation_id: str) -> list[ActionRecord]:
    """The conversation's latest actions, newest first."""
    return list(
        ActionRecord.objects.filter(conversation_id=conversation_id)
        .select_related("operation")
        .order_by("-created_at")[:50]
    )


@require_GET
@desk_permission
def alerts_json(request: HttpRequest, admin_site: AdminSite) -> JsonResponse:
    """What every desk page alerts on: how many conversations wait, the longest waiting
    first (re-read when the live channel nudges, and every 30 s while a desk page is open,
    which keeps the staff member present), and their own presence."""
    me = request.user.get_username()
    service.staff_seen(me)
    found = alerts.summary()
    presence = service.staff_status(me)
    return JsonResponse(
        {
            "me": {"away": presence.away, "available": presence.available},
            "office_open": service.office_open(),
            "waiting": found.count,
            "conversations": [
                {
                    "id": item.id,
                    "who": item.who,
                    "said": item.said,
                    "since": item.since,
                    "assignee": item.assignee,
                    "url": _url(admin_site, CONVERSATION, item.id),
                }
                for item in found.waiting
            ],
        }
    )


@require_POST
@desk_permission
def presence(request: HttpRequest, admin_site: AdminSite) -> JsonResponse:
    """Set oneself away (``{"away": true}``: no new handoffs) or available again."""
    try:
        body = _body(request)
        away = body.get("away")
        if not isinstance(away, bool):
            raise PoppyError("invalid_request", "away must be true or false.")
        status = service.set_away(request.user.get_username(), away)
    except PoppyError as exc:
        return exc.response()
    return JsonResponse({"away": status.away, "available": status.available})


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


# Live stream ------------------------------------------------------------------------------


@require_GET
@desk_permission
def queue_stream(request: HttpRequest, admin_site: AdminSite) -> HttpResponseBase:
    """django-eventstream's browser stream of the desk channel (every conversation's nudges)."""
    _present(request)
    response: HttpResponseBase = eventstream_events(request, channels=[desk_channel()])
    return response


@require_GET
@desk_permission
def conversation_stream(
    request: HttpRequest, conversation_id: str, admin_site: AdminSite
) -> HttpResponseBase:
    """The desk channel (nudges with request ids) and the conversation's (reply pieces)."""
    conversation = _conversation_or_404(conversation_id)
    _present(request)
    channels = [desk_channel(), conversation_channel(conversation.id)]
    response: HttpResponseBase = eventstream_events(request, channels=channels)
    return response


# Actions ----------------------------------------------------------------------------------


def _text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value.strip():
        raise PoppyError("invalid_request", f"{name} is required.")
    if len(value) > MAX_TEXT:
        raise PoppyError("invalid_request", f"{name} is too long.")
    return value.strip()


def _optional_text(body: dict[str, Any], name: str) -> str:
    value = body.get(name, "")
    if not isinstance(value, str):
        raise PoppyError("invalid_request", f"{name} must be text.")
    if len(value) > MAX_TEXT:
        raise PoppyError("invalid_request", f"{name} is too long.")
    return value.strip()


def _seen(conversation_id: str, body: dict[str, Any]) -> str:
    """The id of the last event the page showed, from its sequence number (``seen``)."""
    seen = body.get("seen")
    if isinstance(seen, bool) or not isinstance(seen, int) or seen < 1:
        raise PoppyError("invalid_request", "seen: the sequence number of the last event shown.")
    return ids.event_id(conversation_id, seen)


Action = Callable[[str, dict[str, Any], str, str], object]

#: The desk's actions: (conversation id, body, staff username, request id) → the service.
ACTIONS: dict[str, Action] = {
    "join": lambda cid, body, by, rid: service.human_joined(cid, by=by, request_id=rid),
    "reply": lambda cid, body, by, rid: service.post_message(
        cid, _text(body, "text"), by=by, seen=_seen(cid, body), request_id=rid
    ),
    "leave": lambda cid, body, by, rid: service.human_left(cid, by=by, request_id=rid),
    "unavailable": lambda cid, body, by, rid: service.handoff_unavailable(
        cid, _text(body, "reason"), by=by, request_id=rid
    ),
    "request_user": lambda cid, body, by, rid: service.request_user(
        cid, _text(body, "reason"), by=by, request_id=rid
    ),
    "close": lambda cid, body, by, rid: service.close(cid, by=by, request_id=rid),
    "take_over": lambda cid, body, by, rid: service.take_over(cid, by=by, request_id=rid),
    "assign": lambda cid, body, by, rid: service.assign(
        cid, _text(body, "to"), by=by, note=_optional_text(body, "note"), request_id=rid
    ),
    "unassign": lambda cid, body, by, rid: service.unassign(cid, by=by, request_id=rid),
    "transfer": lambda cid, body, by, rid: service.transfer(
        cid, _text(body, "to"), by=by, note=_optional_text(body, "note"), request_id=rid
    ),
    "note": lambda cid, body, by, rid: service.add_note(
        cid, _text(body, "text"), by=by, request_id=rid
    ),
}


def _body(request: HttpRequest) -> dict[str, Any]:
    try:
        body = json.loads(request.body or b"{}")
    except (ValueError, RecursionError) as exc:
        raise PoppyError("invalid_request", "The body must be JSON.") from exc
    if not isinstance(body, dict):
        raise PoppyError("invalid_request", "The body must be a JSON object.")
    return body


def _request_id(body: dict[str, Any]) -> str:
    request_id = body.get("request_id")
    if not isinstance(request_id, str) or not REQUEST_ID.fullmatch(request_id):
        raise PoppyError("invalid_request", "request_id: 8-64 characters of [A-Za-z0-9_-].")
    return request_id


def _caused(conversation_id: str, request_id: str) -> list[int]:
    """The events a request id is echoed on (the correlation contract)."""
    return list(
        Event.objects.filter(conversation_id=conversation_id, meta__request_id=request_id)
        .order_by("seq")
        .values_list("seq", flat=True)
    )


def _caused_privately(conversation_id: str, request_id: str) -> list[int]:
    """The desk's own events a request id wrote (notes, assignments, take-overs)."""
    return list(
        DeskEvent.objects.filter(conversation_id=conversation_id, request_id=request_id)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def _perform(
    request: HttpRequest,
    conversation_id: str,
    name: str,
    run: Callable[[dict[str, Any], str, str], object],
    *,
    done_before: Callable[[str], bool] = lambda request_id: False,
    running: Callable[[str], bool] = lambda request_id: False,
) -> JsonResponse:
    """Run one desk action once per request id; answer what it caused.

    The body is parsed once, here. Checking for a repeat and acting happen under the
    conversation's row lock, so a request sent twice at once (a double click, a retry)
    is done once: the second waits for the first, then finds its effect and answers it.
    ``done_before`` recognises a retried request whose effect is not an event yet, and
    ``running`` says the effect is still being made by a worker (``"running": true``: the
    events carrying the request id follow on the live stream).
    """
    try:
        body = _body(request)
        request_id = _request_id(body)
        with transaction.atomic():
            event_log.lock(conversation_id)
            replayed = (
                bool(_caused(conversation_id, request_id))
                or bool(_caused_privately(conversation_id, request_id))
                or done_before(request_id)
            )
            if not replayed:
                run(body, request_id, request.user.get_username())
        conversation = Conversation.objects.get(pk=conversation_id)
    except PoppyError as exc:
        return _refusal(exc, conversation_id)
    except Conversation.DoesNotExist:
        return error_response("conversation_not_found")
    return JsonResponse(
        {
            "ok": True,
            "action": name,
            "request_id": request_id,
            "events": _caused(conversation_id, request_id),
            "desk_events": _caused_privately(conversation_id, request_id),
            "replayed": replayed,
            "running": running(request_id),
            "conversation": state(conversation),
        }
    )


def _refusal(error: PoppyError, conversation_id: str) -> JsonResponse:
    """A refused action, with the conversation as it is now: the page shows why (who has
    it, what arrived) and what it can do next from the server's state, not its own."""
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None:
        return error.response()
    return error_response(
        error.code,
        error.description,
        status=error.status,
        extra={**error.extra, "conversation": state(conversation)},
        headers=error.headers,
    )


@require_POST
@desk_permission
def action(
    request: HttpRequest, conversation_id: str, name: str, admin_site: AdminSite
) -> JsonResponse:
    """Join, take_over, reply, leave, unavailable, request_user, close, assign, unassign,
    transfer, note: each one call of poppy_django.service, as the signed-in staff member."""
    perform = ACTIONS.get(name)
    if perform is None:
        return error_response("not_found", f"No desk action {name!r}.")
    return _perform(
        request,
        conversation_id,
        name,
        lambda body, rid, by: perform(conversation_id, body, by, rid),
    )


@require_POST
@desk_permission
def approval(
    request: HttpRequest, conversation_id: str, record_id: int, decision: str, admin_site: AdminSite
) -> JsonResponse:
    """Approve (a worker runs it under the recorded roles) or reject an awaiting action.

    Approving answers once the decision is recorded (``"running": true``); the outcome
    message, carrying the request id, follows on the live stream when a worker has run it.
    """
    if decision not in ("approve", "reject"):
        return error_response("not_found", f"No decision {decision!r}.")
    record = ActionRecord.objects.filter(pk=record_id, conversation_id=conversation_id)
    if not record.exists():
        return error_response("not_found", "There is no such action in this conversation.")
    decide = decisions.approve if decision == "approve" else decisions.reject
    return _perform(
        request,
        conversation_id,
        decision,
        lambda body, rid, by: decide(record_id, by=by, request_id=rid),
        done_before=lambda rid: record.filter(request_id=rid).exists(),
        running=lambda rid: record.filter(request_id=rid, status=ActionStatus.APPROVED).exists(),
    )
