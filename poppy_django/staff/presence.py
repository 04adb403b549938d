"""Staff presence: who takes handoffs now.

A staff member is *available* when they hold the desk permission, have not set themselves
away, and have a live desk: a desk page of theirs was open within
``POPPY["STAFF_AWAY_AFTER_SECONDS"]`` (the desk's pages call :func:`seen` when they load and
while they stay open) and they have not left since. Leaving is known at once: when the last
live connection of their desk pages closes (:mod:`poppy_django.staff.connections`), it is
written down (``left_at``), and only a desk page opened afterwards makes them available
again. The window alone decides only where no connection says so (a crashed process, a desk
without its live stream), so closing the last desk tab makes them away by itself, with no
"sign off" to forget.

Staff are named by username (``get_username()``), as ``by`` is everywhere in the service.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from poppy_django.conf import poppy_settings
from poppy_django.errors import PoppyError
from poppy_django.models import StaffPresence

#: Staff handle conversations at the desk with this permission (``Conversation.Meta``).
PERMISSION = "poppy_django.handle_conversations"


@dataclass(frozen=True)
class StaffStatus:
    """One staff member's presence, as the desk shows it."""

    username: str
    #: Set by themselves: they take no new handoffs.
    away: bool
    #: When a desk page of theirs was last open (None: never).
    last_seen_at: datetime | None
    #: Not away, and seen lately: the default hooks count them in.
    available: bool


def can_handle(user: Any) -> bool:
    """Active users with the desk permission (superusers have every permission)."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    has_perm = getattr(user, "has_perm", None)  # any user model: PermissionsMixin's, or its own
    return bool(callable(has_perm) and has_perm(PERMISSION))


def staff_member(username: str) -> Any:
    """The active user with the desk permission named ``username``, or ``unknown_staff``."""
    model = get_user_model()
    user = model._default_manager.filter(**{model.USERNAME_FIELD: username}).first()
    if not username or not can_handle(user):
        raise PoppyError("unknown_staff", f"{username!r} is not on the support desk.")
    return user


def staff_by_username(usernames: list[str]) -> dict[str, Any]:
    """The users named, by username (those who do not exist left out)."""
    model = get_user_model()
    field = model.USERNAME_FIELD
    found = model._default_manager.filter(**{f"{field}__in": usernames})
    return {user.get_username(): user for user in found}


def _cutoff() -> datetime:
    return timezone.now() - timedelta(seconds=poppy_settings.STAFF_AWAY_AFTER_SECONDS)


def seen(username: str) -> None:
    """A desk page of ``username``'s is open now (its load, or its live connection's ping)."""
    user = staff_member(username)
    now = timezone.now()
    if not StaffPresence.objects.filter(user=user).update(last_seen_at=now):
        StaffPresence.objects.get_or_create(user=user, defaults={"last_seen_at": now})


def set_away(username: str, away: bool) -> StaffStatus:
    """``username`` takes no new handoffs (``away=True``), or takes them again."""
    user = staff_member(username)
    StaffPresence.objects.update_or_create(user=user, defaults={"away": away})
    return status(username)


def status(username: str) -> StaffStatus:
    """``username``'s presence (``unknown_staff`` if not on the desk)."""
    user = staff_member(username)
    presence = StaffPresence.objects.filter(user=user).first()
    if presence is None:
        return StaffStatus(username, away=False, last_seen_at=None, available=False)
    return StaffStatus(
        username,
        away=presence.away,
        last_seen_at=presence.last_seen_at,
        available=_available(presence, _cutoff()),
    )


def _available(
    presence: StaffPresence, cutoff: datetime, left_before: datetime | None = None
) -> bool:
    """Not away, seen since ``cutoff``, and not left since (a departure after
    ``left_before`` is not counted yet: the grace a page moving to the next one needs)."""
    left = presence.left_at
    return (
        not presence.away
        and presence.last_seen_at is not None
        and presence.last_seen_at >= cutoff
        and (
            left is None
            or left < presence.last_seen_at
            or (left_before is not None and left >= left_before)
        )
        and can_handle(presence.user)
    )


def available(*, grace: float = 0.0) -> list[str]:
    """The usernames of the staff available now, sorted. ``grace``: those who left within
    that many seconds still count (a desk page closes as the next one opens)."""
    cutoff = _cutoff()
    left_before = timezone.now() - timedelta(seconds=grace) if grace else None
    present = StaffPresence.objects.filter(away=False, last_seen_at__gte=cutoff).select_related(
        "user"
    )
    return sorted(p.user.get_username() for p in present if _available(p, cutoff, left_before))


def everyone() -> list[StaffStatus]:
    """Every staff member who ever opened the desk, with their presence (for a team view)."""
    cutoff = _cutoff()
    return sorted(
        (
            StaffStatus(
                p.user.get_username(),
                away=p.away,
                last_seen_at=p.last_seen_at,
                available=_available(p, cutoff),
            )
            for p in StaffPresence.objects.select_related("user")
            if can_handle(p.user)
        ),
        key=lambda item: item.username,
    )
