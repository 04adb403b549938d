"""The desk's two pages: the queue, and one conversation with its live transcript.

Every view is wrapped by the admin site (login, staff) and by :func:`desk_permission`.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin import AdminSite
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from poppy_django import ids, service
from poppy_django.conf import poppy_settings
from poppy_django.desk import (
    customers,
    decisions,
    macros,
    parameters,
    queue,
    routes,
    search,
    transcript,
    wording,
)
from poppy_django.desk.context import page_context
from poppy_django.desk.permissions import can_read_reports, desk_permission
from poppy_django.desk.state import action_log, conversation_or_404, conversation_state
from poppy_django.errors import PoppyError
from poppy_django.models import Conversation, DeskEvent, Event
from poppy_django.staff import teams
from poppy_django.store import tags


@require_GET
@desk_permission
def queue_page(request: HttpRequest, admin_site: AdminSite) -> HttpResponse:
    """The queue (``?status=`` a tab, ``?tag=`` a tag, ``?team=`` a team, ``?q=`` a search,
    each row with a snippet of what the search matched); ``?partial=rows`` answers only the
    rows (the page re-fetches them live)."""
    chosen = queue.chosen_filter(request.GET.get("status"))
    try:
        text = parameters.query_text(request, "q")
        tag = parameters.query_text(request, "tag")
        team = teams.checked(parameters.query_text(request, "team"))
    except PoppyError as error:
        raise BadRequest(error.description) from None
    me = request.user.get_username()
    rows = list(queue.conversations(chosen.key, text, me=me, tag=tag, team=team)[: queue.LIMIT])
    found = search.snippets(rows, text)
    # A conversation's page is ``<queue url><id>/`` (see urls.py).
    context: dict[str, Any] = {
        "rows": [(row, found.get(row.id)) for row in rows],
        "desk_url": routes.url(admin_site, routes.QUEUE),
        "lease_seconds": f"{poppy_settings.LEASE_SECONDS:g}",
    }
    if request.GET.get("partial") == "rows":
        return render(request, "poppy_django/desk/queue_rows.html", context)
    counts = queue.counts(me)
    context.update(page_context(request, admin_site, "Support desk"))
    context.update(
        {
            "filters": [(item, counts[item.key]) for item in queue.FILTERS],
            "chosen": chosen,
            "q": text,
            "tag": tag,
            "tags": queue.tag_counts(),
            "team": team,
            "teams": queue.team_counts(teams.names()),
            "reports_url": (
                routes.url(admin_site, routes.REPORTS) if can_read_reports(request.user) else ""
            ),
            "stream_url": routes.url(admin_site, routes.QUEUE_STREAM),
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
    conversation = conversation_or_404(conversation_id)
    highlight = request.GET.get("event", "")
    before = _window_end(request, conversation, highlight)
    size = transcript.EVENTS_PAGE
    newest_first = conversation.events.order_by("-seq")
    if before is not None:
        newest_first = newest_first.filter(seq__lt=before)
    window = list(newest_first[: size + 1])
    shown = window[:size][::-1]
    page_url = routes.url(admin_site, routes.CONVERSATION, conversation.id)
    title = f"Conversation with {wording.who(conversation)}"
    context = page_context(request, admin_site, title)
    private = service.desk_events(conversation.id)
    me = request.user.get_username()
    context.update(
        conversation=conversation,
        state=conversation_state(conversation),
        entries=_with_private(shown, private, latest=before is None),
        last_desk_event=private[-1].pk if private else 0,
        teammates=[mate for mate in service.team() if mate.username != me],
        teams=teams.names(),
        canned_url=routes.url(admin_site, routes.CANNED, conversation.id),
        macros=macros.listed(),
        tag_names=tags.every_name(),
        earlier_url=f"{page_url}?before={shown[0].seq}" if len(window) > size else "",
        latest_url=page_url if shown and shown[-1].seq < conversation.last_seq else "",
        highlight=highlight,
        approvals=list(decisions.awaiting(conversation.id)),
        running=list(decisions.running(conversation.id)),
        actions=action_log(conversation.id),
        directs=list(conversation.direct_conversations.order_by("created_at")),
        customer_name=customers.name(conversation),
        earlier=list(
            customers.others(conversation).annotate(last_said=queue.last_said())[
                : customers.EARLIER_SHOWN + 1
            ]
        ),
        earlier_shown=customers.EARLIER_SHOWN,
        page_url=page_url,
        stream_url=routes.url(admin_site, routes.CONVERSATION_STREAM, conversation.id),
        events_url=routes.url(admin_site, routes.EVENTS, conversation.id),
        activity_url=routes.url(admin_site, routes.ACTIVITY, conversation.id),
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


@desk_permission
def not_found(request: HttpRequest, rest: str, admin_site: AdminSite) -> HttpResponse:
    """A desk URL no route takes (a conversation id holding U+0000, say): 404."""
    raise Http404("No such page of the desk.")


def _window_end(request: HttpRequest, conversation: Conversation, highlight: str) -> int | None:
    """The seq the transcript page ends before: ``?before`` (a ``400`` page unless it is a
    sequence number), else past an older linked event."""
    try:
        before = parameters.optional_sequence_number(request, "before", "a sequence number")
    except PoppyError as error:
        raise BadRequest(error.description) from None
    if before is not None:
        return before
    seq = ids.parse_cursor(conversation.id, highlight) if highlight else None
    if seq is not None and seq <= conversation.last_seq - transcript.EVENTS_PAGE:
        return seq + 1  # the linked event is older than the latest page: end the page on it
    return None
