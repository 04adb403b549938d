"""Starting and renewing Sessions (Poppy draft 0.2 §4.2-4.3), and ending them.

A new Session is signed out. Renewal by ``session_id`` keeps the Session (and whatever a
sign-in gave it) and binds the new token to the proof's key; another User's, another
client's or an ended Session is ``invalid_session``.
"""

from __future__ import annotations

import secrets

from django.core.cache import caches
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from poppy_django.authority.conf import authority_settings
from poppy_django.authority.errors import InvalidSessionError, TooManySessionsError
from poppy_django.authority.models import Client, Session
from poppy_django.observe import tracing
from poppy_django.verifier import sessions as session_status

RATE_PREFIX = "poppy:authority:sessions:"


def new_session_id() -> str:
    """``ses_`` and 128 random bits: unguessable, though a session id is no credential."""
    return "ses_" + secrets.token_urlsafe(16)


def _count_new_session(client: Client) -> None:
    limit = authority_settings().SESSIONS_PER_CLIENT_PER_MINUTE
    if limit is None:
        return
    cache = caches[str(authority_settings().REPLAY_CACHE)]
    key = f"{RATE_PREFIX}{client.pk}"
    cache.add(key, 0, timeout=60)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=60)
        count = 1
    if count > int(limit):
        raise TooManySessionsError("Too many new Sessions from this client; retry later.")


def start_session(client: Client, user_id: str, jkt: str | None) -> Session:
    """A new signed-out Session of ``client`` for ``user_id`` (no key yet: ``jkt`` None, a
    Session started for a Bearer MCP token)."""
    _count_new_session(client)
    tracing.event("session_started")
    return Session.objects.create(
        session_id=new_session_id(), client=client, user_id=user_id, jkt=jkt or ""
    )


def renew_session(client: Client, user_id: str, jkt: str | None, session_id: str) -> Session:
    """The Session ``session_id`` of this client and User, now bound to ``jkt`` (None: a
    Bearer MCP token is issued and the Session keeps its key)."""
    with transaction.atomic():
        session = (
            Session.objects.select_for_update()
            .select_related("client")
            .filter(session_id=session_id, client=client, user_id=user_id, ended_at=None)
            .first()
        )
        if session is None:
            raise InvalidSessionError("The Session is unknown or has ended.")
        session.jkt = session.jkt if jkt is None else jkt
        session.renewed_at = timezone.now()
        session.save(update_fields=["jkt", "renewed_at"])
    return session


def end_sessions(sessions: QuerySet[Session]) -> int:
    """End Sessions now: their tokens are refused from the next request on (every process
    is told once the change commits, before this returns outside a transaction)."""
    with transaction.atomic():
        open_sessions = sessions.filter(ended_at=None).select_for_update()
        ids = list(open_sessions.values_list("session_id", flat=True))
        ended = Session.objects.filter(session_id__in=ids).update(ended_at=timezone.now())
        transaction.on_commit(lambda: session_status.revoked(*ids))
    tracing.event("signed_out", count=ended)
    return ended
