"""The support team as the desk sees it: presence (who takes handoffs now), office hours,
and the canned replies filled for a conversation."""

from __future__ import annotations

from poppy_django.errors import PoppyError
from poppy_django.models import CannedReply, Conversation
from poppy_django.service import rerouting
from poppy_django.staff import canned, office_hours, presence, teams
from poppy_django.staff.canned import RenderedReply
from poppy_django.staff.presence import StaffStatus


def staff_seen(username: str) -> None:
    """A desk page of ``username``'s is open (called as it loads and while it stays open)."""
    presence.seen(username)


def set_away(username: str, away: bool) -> StaffStatus:
    """``username`` takes no new handoffs (``away=True``) or takes them again. Going away
    gives the handoffs waiting for them to others (:mod:`.rerouting`)."""
    status = presence.set_away(username, away)
    if away:
        rerouting.reassign_from(username)
    return status


def staff_status(username: str) -> StaffStatus:
    return presence.status(username)


def available_staff() -> list[str]:
    """The usernames of the staff who take handoffs now."""
    return presence.available()


def team() -> list[StaffStatus]:
    """Everyone who has used the desk, with their presence."""
    return presence.everyone()


def teams_of(username: str) -> list[str]:
    """The desk's teams ``username`` is in (``POPPY["DESK_TEAMS"]``)."""
    return teams.of(username)


def office_open() -> bool:
    """Whether it is office hours now (always, without ``POPPY["OFFICE_HOURS"]``)."""
    return office_hours.open_now()


def canned_replies(conversation_id: str) -> list[RenderedReply]:
    """Every canned reply, its placeholders filled for this conversation."""
    return canned.rendered(_existing(conversation_id))


def canned_reply(conversation_id: str, shortcut: str) -> RenderedReply:
    """One canned reply by its shortcut, filled for this conversation (``not_found``)."""
    reply = CannedReply.objects.filter(shortcut=shortcut).first()
    if reply is None:
        raise PoppyError("not_found", f"No canned reply /{shortcut}.")
    return canned.render(_existing(conversation_id), reply)


def _existing(conversation_id: str) -> Conversation:
    try:
        return Conversation.objects.get(pk=conversation_id)
    except Conversation.DoesNotExist as exc:
        raise PoppyError("conversation_not_found") from exc
