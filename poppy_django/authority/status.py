"""The session-status seam's callable: is the Session behind a verified token still on?

``POPPY["SESSION_STATUS"] = "poppy_django.authority.status.session_is_active"``. A Session
Token stays valid until it expires; this makes signing out (or a blocked client) take
effect at the very next request instead.
"""

from __future__ import annotations

from poppy_django.auth.principal import Principal
from poppy_django.authority.models import Session


def session_is_active(principal: Principal) -> bool:
    """False when the token's Session ended, its client is blocked, or - for a signed-in
    token - the sign-in it came from was revoked (the Session continues signed out).

    A ``session_id`` this authority never issued (a development token minted by
    ``poppy_token`` with the same key) is not the authority's to end: it stays active.
    """
    if not principal.session_id:
        return True
    session = (
        Session.objects.select_related("client")
        .filter(session_id=principal.session_id)
        .only("ended_at", "grant_id", "account_id", "client__status", "client__client_id")
        .first()
    )
    if session is None:
        return True
    if not session.active or session.client.client_id != principal.client_id:
        return False
    if principal.signed_in:
        return session.signed_in and session.account_id == principal.account_id
    return True
