"""The session-status seam's callable: is the Session behind a verified token still on?

``POPPY["SESSION_STATUS"] = "poppy_django.authority.status.session_is_active"``. A Session
Token stays valid until it expires; this makes signing out (or a blocked client) take
effect at the very next request instead.
"""

from __future__ import annotations

from typing import Literal

from poppy_django.authority.models import RevokedSession, Session
from poppy_django.verifier.principal import Principal
from poppy_django.verifier.sessions import SIGNED_OUT


def session_is_active(principal: Principal) -> bool | Literal["signed_out"]:
    """False when the token's Session ended or its client is blocked; ``"signed_out"`` for a
    signed-in token whose sign-in was revoked, or whose approval no longer stands (its user
    deactivated or its password changed, even by a bulk update no signal reports): the
    Session continues, signed out.

    A ``session_id`` with no Session row is a development token minted by ``poppy_token``
    (development mode): active unless ``poppy_token --revoke`` revoked it.
    """
    if not principal.session_id:
        return True
    session = (
        Session.objects.select_related("client", "grant")
        .filter(session_id=principal.session_id)
        .only(
            "ended_at",
            "grant_id",
            "account_id",
            "client__status",
            "client__client_id",
            "grant__approved_by_id",
            "grant__account_state",
        )
        .first()
    )
    if session is None:
        return not RevokedSession.objects.filter(session_id=principal.session_id).exists()
    if not session.active or session.client.client_id != principal.client_id:
        return False
    if principal.signed_in and not (
        session.grant is not None
        and session.account_id == principal.account_id
        and session.grant.approval_stands()
    ):
        return SIGNED_OUT
    return True
