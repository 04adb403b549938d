"""The reports page for the team lead (``poppy_django.view_desk_reports``) and its CSV.

Wrapped by the admin site (login, staff) and by :func:`reports_permission`.
"""

from __future__ import annotations

import csv
from typing import Any

from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from poppy_django.desk import reports, routes
from poppy_django.desk.permissions import reports_permission
from poppy_django.errors import PoppyError, error_response
from poppy_django.models import Conversation

#: What the CSV lists: a row per staff member, per team, or per handoff.
CSV_OF = ("staff", "team", "handoffs")
#: A cell starting with one of these is read as a formula by spreadsheets (OWASP's CSV
#: injection): it is written after a quote.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@require_GET
@reports_permission
def reports_page(request: HttpRequest, admin_site: AdminSite) -> HttpResponse:
    """The period's figures, with charts; a wrong period says why (400) and shows the last
    7 days' instead of nothing."""
    problem = ""
    try:
        chosen = reports.period(request.GET.get("from"), request.GET.get("to"))
    except PoppyError as exc:
        problem = exc.description or exc.code
        chosen = reports.period(None, None)
    found = reports.report(chosen)
    query = f"from={chosen.first.isoformat()}&to={chosen.last.isoformat()}"
    context: dict[str, Any] = {
        **admin_site.each_context(request),
        "is_nav_sidebar_enabled": False,
        "title": "Support desk reports",
        "opts": Conversation._meta,
        "queue_url": routes.url(admin_site, routes.QUEUE),
        "desk_url": routes.url(admin_site, routes.QUEUE),
        "report": found,
        "problem": problem,
        "csv_url": f"{routes.url(admin_site, routes.REPORTS_CSV)}?{query}",
        "outcomes": reports.OUTCOMES,
        "charts": _charts(found),
    }
    return render(
        request, "poppy_django/desk/reports.html", context, status=400 if problem else 200
    )


def _charts(found: reports.Report) -> dict[str, Any]:
    """What the page's charts draw (the page reads it as JSON)."""
    return {
        "days": [day.isoformat() for day, _ in found.daily],
        "outcomes": {
            str(outcome): [counts[outcome] for _, counts in found.daily]
            for outcome in reports.OUTCOMES
        },
        "staff": [row.name for row in found.staff],
        "first_response_median": [row.first_response.median for row in found.staff],
        "resolution_median": [row.resolution.median for row in found.staff],
        "ratings": [found.desk.csat.ratings[rating] for rating in range(1, 6)],
    }


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


@require_GET
@reports_permission
def reports_csv(request: HttpRequest, admin_site: AdminSite) -> HttpResponse:
    """The period's figures as CSV: ``of=staff`` (default), ``team`` or ``handoffs``."""
    of = request.GET.get("of", "staff")
    if of not in CSV_OF:
        return error_response("invalid_request", f"of is one of {', '.join(CSV_OF)}.")
    try:
        chosen = reports.period(request.GET.get("from"), request.GET.get("to"))
    except PoppyError as exc:
        return exc.response()
    found = reports.report(chosen)
    name = f"desk-{of}-{chosen.first.isoformat()}-{chosen.last.isoformat()}.csv"
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    writer = csv.writer(response)
    if of == "handoffs":
        writer.writerow(
            [
                "requested_at",
                "conversation",
                "initiator",
                "outcome",
                "reason",
                "staff",
                "team",
                "outcome_at",
                "first_response_at",
                "first_response_by",
                "ended_at",
            ]
        )
        for r in found.records:
            writer.writerow(
                _cell(value)
                for value in (
                    r.requested_at.isoformat(),
                    r.conversation_id,
                    r.initiator,
                    r.outcome,
                    r.reason,
                    r.staff,
                    r.team,
                    r.outcome_at.isoformat() if r.outcome_at else "",
                    r.first_response_at.isoformat() if r.first_response_at else "",
                    r.first_response_by,
                    r.ended_at.isoformat() if r.ended_at else "",
                )
            )
        return response
    writer.writerow(
        [
            of,
            "handoffs",
            *[str(outcome) for outcome in reports.OUTCOMES],
            "first_responses",
            "first_response_median_s",
            "first_response_mean_s",
            "resolved",
            "resolution_median_s",
            "resolution_mean_s",
            "csat_asked",
            "csat_answered",
            "csat_mean",
            "csat_satisfied_share",
        ]
    )
    rows = found.staff if of == "staff" else found.teams
    for row in [*rows, found.desk]:
        csat = row.csat
        writer.writerow(
            [
                _cell(row.name),
                row.handoffs,
                *[row.outcomes[outcome] for outcome in reports.OUTCOMES],
                row.first_response.count,
                _seconds(row.first_response.median),
                _seconds(row.first_response.mean),
                row.resolution.count,
                _seconds(row.resolution.median),
                _seconds(row.resolution.mean),
                csat.asked,
                csat.answered,
                "" if csat.mean is None else f"{csat.mean:.2f}",
                "" if csat.satisfied is None else f"{csat.satisfied:.2f}",
            ]
        )
    return response
