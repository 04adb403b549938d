"""Who may use the desk: one permission, checked on every view and on the live channels."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseBase

#: Staff handle conversations at the desk with this permission (``Conversation.Meta``).
PERMISSION = "poppy_django.handle_conversations"
#: A team lead reads the desk's reports with this one.
REPORTS_PERMISSION = "poppy_django.view_desk_reports"


def _has(user: AbstractBaseUser | AnonymousUser | None, permission: str) -> bool:
    """Active, authenticated users with ``permission`` (superusers have every permission)."""
    if user is None or not user.is_authenticated:
        return False
    # Any user model: PermissionsMixin's has_perm, or the project's own.
    has_perm = getattr(user, "has_perm", None)
    return bool(callable(has_perm) and has_perm(permission))


def can_handle(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    """Whether ``user`` may handle conversations at the desk."""
    return _has(user, PERMISSION)


def can_read_reports(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    """Whether ``user`` may read the desk's reports (a team lead)."""
    return _has(user, REPORTS_PERMISSION)


def desk_permission(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """Refuse (403) a signed-in user without the permission.

    The admin site's ``admin_view`` wraps every desk view first, so the anonymous and
    non-staff are sent to the admin login before this runs; the check stays here too, so a
    view mounted elsewhere is never open.
    """

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not can_handle(request.user):
            raise PermissionDenied("You may not handle Poppy conversations.")
        return view(request, *args, **kwargs)

    return wrapped


def reports_permission(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """Refuse (403) a signed-in user who may not read the desk's reports."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not can_read_reports(request.user):
            raise PermissionDenied("You may not read the support desk's reports.")
        return view(request, *args, **kwargs)

    return wrapped
