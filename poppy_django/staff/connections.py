"""Live desks: the open live connections of staff's desk pages, and when a staff member left.

Each desk page keeps a live connection (its stream) open while it is open. The connection is
written down when it opens (:func:`opened`), renewed while it stays open (:func:`renewed`,
as its keep-alives pass), and removed when it closes (:func:`closed`), however it closes:
the tab closed, the browser quit, the network gone. When a staff member's last one closes,
they *left* (``StaffPresence.left_at``), at once: presence stops counting them although a
page of theirs was seen within ``POPPY["STAFF_AWAY_AFTER_SECONDS"]``, and no handoff is
given to them. A connection that a crashed process never closed stops counting once it has
not been renewed within that window.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from poppy_django.conf import poppy_settings
from poppy_django.models import DeskConnection, StaffPresence
from poppy_django.staff import presence

#: How often an open connection is written down again: well within the presence window.
RENEW_EVERY_SECONDS = 20.0


def opened(username: str) -> uuid.UUID:
    """A desk page of ``username``'s opened its live connection: its id, for
    :func:`renewed` and :func:`closed`. The page's presence is renewed with it."""
    user = presence.staff_member(username)
    presence.seen(username)
    now = timezone.now()
    # Those a crashed process never closed go as their staff member comes back.
    DeskConnection.objects.filter(user=user, renewed_at__lt=_stale_before()).delete()
    connection = DeskConnection.objects.create(
        id=uuid.uuid4(), user=user, opened_at=now, renewed_at=now
    )
    return connection.id


def renewed(connection_id: uuid.UUID) -> None:
    """The connection is still open."""
    DeskConnection.objects.filter(pk=connection_id).update(renewed_at=timezone.now())


def _stale_before() -> datetime:
    return timezone.now() - timedelta(seconds=poppy_settings.STAFF_AWAY_AFTER_SECONDS)


@transaction.atomic
def closed(connection_id: uuid.UUID) -> bool:
    """The connection closed; whether its staff member left (it was their last live one).

    Under their presence row's lock, so that two of their pages closing at once cannot
    each count the other as still open."""
    user_id = (
        DeskConnection.objects.filter(pk=connection_id).values_list("user_id", flat=True).first()
    )
    if user_id is None:
        return False
    row = StaffPresence.objects.select_for_update().filter(user_id=user_id).first()
    DeskConnection.objects.filter(pk=connection_id).delete()
    mine = DeskConnection.objects.filter(user_id=user_id)
    mine.filter(renewed_at__lt=_stale_before()).delete()  # never closed: a crashed process
    if row is None or mine.exists():
        return False
    row.left_at = timezone.now()
    row.save(update_fields=["left_at"])
    return True
