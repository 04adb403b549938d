"""What every desk page shows around its own content: the admin's frame, the staff member's
presence, the banner of what keeps turns from running, and whether developer details show.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.contrib.admin import AdminSite
from django.http import HttpRequest

from poppy_django import service
from poppy_django.conf import poppy_settings
from poppy_django.desk import routes, wording
from poppy_django.engine.broker_health import health
from poppy_django.models import Conversation


def present(request: HttpRequest) -> None:
    """A desk page of this staff member's is open: they count as available (presence)."""
    service.staff_seen(request.user.get_username())


def page_context(request: HttpRequest, admin_site: AdminSite, title: str) -> dict[str, Any]:
    """The template context every desk page starts from (opening one marks its reader
    present)."""
    present(request)
    return {
        **admin_site.each_context(request),
        # The desk needs the page's width (the queue's columns, the transcript beside the
        # conversation's panel), not the admin's model list beside it.
        "is_nav_sidebar_enabled": False,
        "title": title,
        "opts": Conversation._meta,
        "queue_url": routes.url(admin_site, routes.QUEUE),
        "alerts_url": routes.url(admin_site, routes.ALERTS),
        "presence_url": routes.url(admin_site, routes.PRESENCE),
        "presence": service.staff_status(request.user.get_username()),
        "developer": is_developer(request),
        **health_banner(),
    }


def is_developer(request: HttpRequest) -> bool:
    """Whether the page shows what only a developer reads (worker commands, request ids,
    the diagnostics panel): superusers only; staff read the desk in staff's words."""
    return bool(getattr(request.user, "is_superuser", False))


def health_banner() -> dict[str, Any]:
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
