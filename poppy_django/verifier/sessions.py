"""The session-status seam: has the Session behind a verified token ended, or been signed out?

A Session Token outlives a sign-out by up to its lifetime. ``POPPY["SESSION_STATUS"]`` names a
callable ``(principal) -> bool | "signed_out"`` that the DPoP verifier consults after a token
verifies: ``True`` while the session is active; ``False`` once it has ended (revoked), so the
token is refused as ``401 invalid_token``; ``"signed_out"`` when the session goes on but the
sign-in it carried was revoked (an Account Token revoked, an agent disconnected), so the
token is handled as signed out (seed 001: a Session outlives its sign-in).

An answer is used for at most ``POPPY["SESSION_STATUS_CACHE_SECONDS"]`` (default 5) after the
callable was asked, per session, sign-in and account, so the callable (often a query or an
HTTP call to the issuer) runs at most once per session and window in each cache. Two tiers
keep it: Django's ``default`` cache (shared by the processes) holds the answer with the
wall-clock time it was asked at, and each process memoizes what it read or asked until that
time plus the window — never longer, however late in the window it read the entry — so a hot
session costs one cache round trip per window and process instead of one per request. The
bound assumes the machines' clocks agree (NTP); an entry stamped ahead of this process's clock
is used without a memo, bounded by the cache's own expiry as before. 0 asks every request;
so does an unreachable cache (logged).

The window does not delay a sign-out: the issuer calls :func:`revoked` with the session ids
before its revocation answers. That marks them in the shared cache (an entry asked before
the mark is not used) and tells every process to drop its memo of them, waiting for each
to say so (:mod:`poppy_django.verifier.revocations`, over the fan-out bus's Redis). A process
memoizes only while it hears those messages; while Redis is unreachable it reads the shared
cache per request, and with that down too asks the callable per request (logged).

A principal without a ``session_id`` is asked about on every request (nothing to key a cache
by). An exception from the callable is not an answer: the request fails (a JSON 500, logged)
rather than being let through.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import time
from collections import OrderedDict
from typing import Any, Final, Literal

from django.core.signals import setting_changed
from django.dispatch import receiver

from poppy_django.conf import poppy_settings
from poppy_django.process_cache import shared_cache
from poppy_django.verifier import revocations
from poppy_django.verifier.principal import Principal, SessionStatus

logger = logging.getLogger(__name__)

# "v2": entries are (status, asked_at). Earlier versions store a bare status under
# "poppy:session-status:<hash>" and return whatever they read there, so they must never read
# a new entry (they would take an ended session's tuple for an active one); during a rolling
# upgrade each version asks the callable on its own.
PREFIX = "poppy:session-status:v2:"
#: When a session was last revoked (``revoked``): cached answers asked before it are stale.
REVOKED_PREFIX = "poppy:session-status:v2:revoked:"
#: How long the revocation mark is kept: longer than any window in use.
REVOKED_MARK_SECONDS = 3600
CACHE_ALIAS = "default"
SIGNED_OUT: Final = "signed_out"
#: Sessions a process remembers at once (least recently used dropped first).
MEMO_ENTRIES = 4096

Status = Literal["active", "signed_out", "ended"]
About = tuple[str, bool, str | None]

# about -> (status, until): until is the wall-clock time the answer stops being usable.
_memo: OrderedDict[About, tuple[Status, float]] = OrderedDict()
_memo_lock = threading.Lock()
# Bumped by every revocation heard: an answer asked before one is not memoized.
_generation = 0


def _ask(principal: Principal) -> Status:
    session_status: SessionStatus = poppy_settings.SESSION_STATUS
    answer = session_status(principal)
    if answer == SIGNED_OUT:
        return "signed_out"
    return "active" if answer is True else "ended"


def _remembered(about: About, now: float) -> Status | None:
    with _memo_lock:
        entry = _memo.get(about)
        if entry is None:
            return None
        if now >= entry[1]:
            del _memo[about]
            return None
        _memo.move_to_end(about)
        return entry[0]


def _remember(about: About, found: Status, until: float, generation: int) -> None:
    with _memo_lock:
        if generation != _generation:
            return  # a revocation was heard meanwhile: this answer may predate it
        _memo[about] = (found, until)
        _memo.move_to_end(about)
        if len(_memo) > MEMO_ENTRIES:
            _memo.popitem(last=False)


def forget() -> None:
    """Drop the process's memo (settings changed; tests)."""
    forget_sessions(None)


def forget_sessions(session_ids: frozenset[str] | None) -> None:
    """Drop the memo of ``session_ids`` (None: of every session)."""
    global _generation
    with _memo_lock:
        _generation += 1
        if session_ids is None:
            _memo.clear()
            return
        for about in [about for about in _memo if about[0] in session_ids]:
            del _memo[about]


def _digest(text: str) -> str:
    # A hash: the ids are the issuer's text and must not shape cache keys.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def revoked(*session_ids: str) -> None:
    """The issuer ended these sessions or revoked their sign-in: from the next request on,
    no process serves an answer about them asked before now. Call it once the revocation is
    committed and before answering; it returns once every process heard it (bounded)."""
    if not session_ids:
        return
    now = time.time()
    try:
        shared_cache(CACHE_ALIAS).set_many(
            {REVOKED_PREFIX + _digest(sid): float(now) for sid in session_ids},
            timeout=REVOKED_MARK_SECONDS,
        )
    except Exception:  # the cache is down: the processes reading it ask the callable
        logger.warning("poppy: a revocation could not be marked in the cache", exc_info=True)
    revocations.publish(session_ids, forget_sessions)


@receiver(setting_changed)
def _forget_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting in ("POPPY", "CACHES"):  # another callable, window or shared cache
        forget()


def status(principal: Principal) -> Status:
    """What the seam says of ``principal``'s session (``active`` when no seam is configured)."""
    if poppy_settings.SESSION_STATUS is None:
        return "active"
    seconds = float(poppy_settings.SESSION_STATUS_CACHE_SECONDS)
    if principal.session_id is None or seconds <= 0:
        return _ask(principal)
    # The sign-in is part of the key: one session answers differently for its signed-in and
    # signed-out tokens.
    about: About = (principal.session_id, principal.signed_in, principal.account_id)
    now = time.time()
    generation = _generation
    # The memo only while this process hears every revocation.
    memoize = revocations.listening(forget_sessions)
    remembered = _remembered(about, now) if memoize else None
    if remembered is not None:
        return remembered
    cache = shared_cache(CACHE_ALIAS)
    key = PREFIX + _digest("\0".join(map(str, about)))
    mark = REVOKED_PREFIX + _digest(principal.session_id)
    try:
        found_in_cache = cache.get_many([key, mark])
    except Exception:  # the cache is down (a Redis restart): ask, as with no cache
        logger.warning("poppy: session status not cached, the cache failed", exc_info=True)
        return _ask(principal)
    cached, revoked_at = found_in_cache.get(key), found_in_cache.get(mark)
    if isinstance(cached, tuple) and not (
        isinstance(revoked_at, (int, float)) and revoked_at >= cached[1]
    ):
        found, asked_at = cached
        if asked_at > now:  # stamped by a clock ahead of this one: as before, the cache's TTL
            return found  # bounds it; its window cannot be placed on this clock
        if now < asked_at + seconds:
            if memoize:
                _remember(about, found, asked_at + seconds, generation)
            return found
    found = _ask(principal)  # the answer reflects the session as of ``now`` or later
    if memoize:
        _remember(about, found, now + seconds, generation)
    try:
        cache.set(key, (found, now), timeout=seconds)
    except Exception:
        logger.warning("poppy: session status not cached, the cache failed", exc_info=True)
    return found


def remembered_status(principal: Principal) -> Status | None:
    """What :func:`status` would answer without a cache call or the seam's (None: it would
    need one): what a read on the event loop may use without blocking it."""
    if poppy_settings.SESSION_STATUS is None:
        return "active"
    if principal.session_id is None or float(poppy_settings.SESSION_STATUS_CACHE_SECONDS) <= 0:
        return None
    if not revocations.listening(forget_sessions):
        return None
    about: About = (principal.session_id, principal.signed_in, principal.account_id)
    return _remembered(about, time.time())


def as_it_stands(principal: Principal, found: Status) -> Principal | None:
    """``principal`` as a session whose status is ``found`` stands (see :func:`current`)."""
    if found == "ended":
        return None
    if found == "signed_out" and principal.signed_in:
        return dataclasses.replace(
            principal, signed_in=False, account_id=None, scopes=frozenset(), actor=None
        )
    return principal


def current(principal: Principal) -> Principal | None:
    """``principal`` as its session now stands: None once the session has ended; signed out
    (no account, no scopes, no actor) when its sign-in was revoked; else unchanged."""
    return as_it_stands(principal, status(principal))
