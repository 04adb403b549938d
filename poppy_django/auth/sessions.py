"""The session-status seam: has the Session behind a verified token ended, or been signed out?

A Session Token outlives a sign-out by up to its lifetime. ``POPPY["SESSION_STATUS"]`` names a
callable ``(principal) -> bool | "signed_out"`` that the DPoP verifier consults after a token
verifies: ``True`` while the session is active; ``False`` once it has ended (revoked), so the
token is refused as ``401 invalid_token``; ``"signed_out"`` when the session goes on but the
sign-in it carried was revoked (an Account Token revoked, an agent disconnected), so the
token is handled as signed out (seed 001: a Session outlives its sign-in). The answer is
cached per session, sign-in and account for ``POPPY["SESSION_STATUS_CACHE_SECONDS"]``
(default 5) in Django's ``default`` cache, so the callable (often a query or an HTTP call to
the issuer) runs at most once per session and window in each cache. 0 asks every request;
so does an unreachable cache (logged).

A principal without a ``session_id`` is asked about on every request (nothing to key a cache
by). An exception from the callable is not an answer: the request fails (a JSON 500, logged)
rather than being let through.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from typing import Final, Literal

from poppy_django.auth.principal import Principal
from poppy_django.conf import poppy_settings
from poppy_django.process_cache import shared_cache

logger = logging.getLogger(__name__)

PREFIX = "poppy:session-status:"
CACHE_ALIAS = "default"
SIGNED_OUT: Final = "signed_out"

Status = Literal["active", "signed_out", "ended"]


def _ask(principal: Principal) -> Status:
    answer = poppy_settings.SESSION_STATUS(principal)  # type: ignore[misc]
    if answer == SIGNED_OUT:
        return "signed_out"
    return "active" if answer is True else "ended"


def status(principal: Principal) -> Status:
    """What the seam says of ``principal``'s session (``active`` when no seam is configured)."""
    if poppy_settings.SESSION_STATUS is None:
        return "active"
    seconds = float(poppy_settings.SESSION_STATUS_CACHE_SECONDS)
    if principal.session_id is None or seconds <= 0:
        return _ask(principal)
    cache = shared_cache(CACHE_ALIAS)
    # A hash: the ids are the issuer's text and must not shape cache keys. The sign-in is
    # part of the key: one session answers differently for its signed-in and signed-out tokens.
    about = f"{principal.session_id}\0{principal.signed_in}\0{principal.account_id}"
    key = PREFIX + hashlib.sha256(about.encode("utf-8", "surrogatepass")).hexdigest()
    try:
        cached = cache.get(key)
    except Exception:  # the cache is down (a Redis restart): ask, as with no cache
        logger.warning("poppy: session status not cached, the cache failed", exc_info=True)
        return _ask(principal)
    if cached is not None:
        return cached
    found = _ask(principal)
    try:
        cache.set(key, found, timeout=seconds)
    except Exception:
        logger.warning("poppy: session status not cached, the cache failed", exc_info=True)
    return found


def current(principal: Principal) -> Principal | None:
    """``principal`` as its session now stands: None once the session has ended; signed out
    (no account, no scopes, no actor) when its sign-in was revoked; else unchanged."""
    found = status(principal)
    if found == "ended":
        return None
    if found == "signed_out" and principal.signed_in:
        return dataclasses.replace(
            principal, signed_in=False, account_id=None, scopes=frozenset(), actor=None
        )
    return principal
