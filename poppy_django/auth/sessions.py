"""The session-status seam: has the Session behind a verified token ended (sign-out, revocation)?

A Session Token outlives a sign-out by up to its lifetime. ``POPPY["SESSION_STATUS"]`` names a
callable ``(principal) -> bool`` (True: the session is still active) that the DPoP verifier
consults after a token verifies, so a revoked session is refused as ``401 invalid_token``
within seconds. Its answer is cached per ``session_id`` for
``POPPY["SESSION_STATUS_CACHE_SECONDS"]`` (default 5) in Django's ``default`` cache, so the
callable (often a query or an HTTP call to the issuer) runs at most once per session and
window in each cache, not on every request. 0 asks on every request.

A principal without a ``session_id`` is asked about on every request (nothing to key a cache
by). An exception from the callable is not an answer: the request fails (a JSON 500, logged)
rather than being let through.
"""

from __future__ import annotations

import hashlib

from poppy_django.auth.principal import Principal
from poppy_django.auth.replay import shared_cache
from poppy_django.conf import poppy_settings

PREFIX = "poppy:session-active:"
CACHE_ALIAS = "default"


def is_active(principal: Principal) -> bool:
    """Whether ``principal``'s session is still active (True when no seam is configured)."""
    status = poppy_settings.SESSION_STATUS
    if status is None:
        return True
    seconds = float(poppy_settings.SESSION_STATUS_CACHE_SECONDS)
    if principal.session_id is None or seconds <= 0:
        return bool(status(principal))
    cache = shared_cache(CACHE_ALIAS)
    # A hash: the session id is the issuer's text and must not shape cache keys.
    key = PREFIX + hashlib.sha256(principal.session_id.encode("utf-8", "surrogatepass")).hexdigest()
    cached = cache.get(key)
    if cached is not None:
        return bool(cached)
    active = bool(status(principal))
    cache.set(key, active, timeout=seconds)
    return active
