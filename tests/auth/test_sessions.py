"""Sign-out takes effect at once: the session-status seam, and revocation end to end over HTTP.

``POPPY["SESSION_STATUS"]`` names ``(principal) -> bool``; it is asked after a token verifies,
its answer used per session id for at most ``SESSION_STATUS_CACHE_SECONDS`` after it was
given (a process memo in front of the shared cache). The development authority revokes with
``poppy_token --revoke`` and the example project wires its callable.
"""

from __future__ import annotations

import hashlib
import io
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from poppy_django.client import DPoPKey
from poppy_django.process_cache import shared_cache
from poppy_django.verifier import Principal, dpop, sessions
from poppy_django.verifier.sessions import CACHE_ALIAS
from tests.auth.conftest import dpop_poppy
from tests.auth.support import BASE_URL, ENDPOINT_URL, NOW, Issuer, proof
from tests.auth.test_http import assert_refused
from tests.waiting import eventually

pytestmark = pytest.mark.django_db
PATH = "/poppy/conversations"
HERE = "tests.auth.test_sessions"

#: The principals the test callable was asked about, and the sessions it calls ended.
ASKED: list[Principal] = []
ENDED: set[str] = set()


def session_status(principal: Principal) -> bool:
    ASKED.append(principal)
    return principal.session_id not in ENDED


@pytest.fixture
def seam(settings: Any, issuer: Issuer) -> Iterator[Issuer]:
    ASKED.clear()
    ENDED.clear()
    shared_cache(CACHE_ALIAS).clear()
    dpop_poppy(settings, issuer)
    settings.POPPY = {**settings.POPPY, "SESSION_STATUS": f"{HERE}.session_status"}
    pin_clock()
    yield issuer
    dpop.reset()
    shared_cache(CACHE_ALIAS).clear()


def pin_clock() -> None:
    """The configured verifier (rebuilt on every settings change) on the tests' clock."""
    dpop.reset()
    dpop.get_verifier().clock = lambda: NOW


def cache_seconds(settings: Any, seconds: float) -> None:
    settings.POPPY = {**settings.POPPY, "SESSION_STATUS_CACHE_SECONDS": seconds}
    pin_clock()


def read(token: str, key: DPoPKey, *, now: float = NOW) -> Any:
    """An authenticated read of an unknown conversation: 404 once the caller is verified."""
    url = ENDPOINT_URL + "/cnv_unknown/events"
    return Client().get(
        PATH + "/cnv_unknown/events",
        HTTP_AUTHORIZATION=f"DPoP {token}",
        HTTP_DPOP=proof(key, "GET", url, token, now=now),
    )


def test_a_revoked_session_is_refused_and_an_active_one_accepted(
    settings: Any, seam: Issuer
) -> None:
    cache_seconds(settings, 0)
    key = DPoPKey()
    token = seam.token(jkt=key.thumbprint, now=NOW, sid="ses-active", account="acct-1")
    assert read(token, key).status_code == 404
    (asked,) = ASKED
    assert (asked.session_id, asked.user_id, asked.account_id) == ("ses-active", "user-1", "acct-1")
    ENDED.add("ses-active")
    response = read(token, key)
    assert_refused(response, 401, "invalid_token")
    assert "session revoked" in response.json()["error_description"]
    other = seam.token(jkt=key.thumbprint, now=NOW, sid="ses-other")
    assert read(other, key).status_code == 404


def test_the_answer_is_cached_per_session(settings: Any, seam: Issuer) -> None:
    cache_seconds(settings, 60)
    key = DPoPKey()
    token = seam.token(jkt=key.thumbprint, now=NOW, sid="ses-cached")
    for _ in range(3):
        assert read(token, key).status_code == 404
    assert len(ASKED) == 1
    # Within the window a change the issuer did not announce (no ``revoked``) is not yet
    # seen; another session is asked on its own.
    ENDED.add("ses-cached")
    assert read(token, key).status_code == 404
    assert read(seam.token(jkt=key.thumbprint, now=NOW, sid="ses-2"), key).status_code == 404
    assert len(ASKED) == 2


def test_the_callable_is_not_asked_for_refused_tokens(seam: Issuer) -> None:
    key = DPoPKey()
    token = seam.token(jkt=key.thumbprint, now=NOW, aud="https://elsewhere.example/poppy")
    assert_refused(read(token, key), 401, "invalid_token")
    assert ASKED == []


# -- the process memo: one shared-cache read per window, and never past the window -----------

REDIS_CACHE = {
    "BACKEND": "django.core.cache.backends.redis.RedisCache",
    "LOCATION": os.environ.get("POPPY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"),
}


class Clock:
    """The wall clock the seam stamps and checks answers with, moved by the test."""

    def __init__(self) -> None:
        self.now = NOW

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(sessions, "time", clock)
    return clock


@pytest.fixture(params=["locmem", "redis"])
def reads(
    request: Any, settings: Any, seam: Issuer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[str]]:
    """The session-status keys read from the shared cache (local memory, then Redis)."""
    local = settings.CACHES
    if request.param == "redis":
        settings.CACHES = {**settings.CACHES, CACHE_ALIAS: REDIS_CACHE}
    cache_seconds(settings, 5)
    backend = shared_cache(CACHE_ALIAS)
    keys: list[str] = []
    get_many = backend.get_many

    def counting_get_many(wanted: list[str], *args: Any, **kwargs: Any) -> Any:
        keys.extend(
            key
            for key in wanted
            if key.startswith(sessions.PREFIX) and not key.startswith(sessions.REVOKED_PREFIX)
        )
        return get_many(wanted, *args, **kwargs)

    monkeypatch.setattr(backend, "get_many", counting_get_many)
    yield keys
    settings.CACHES = local  # the seam clears local memory after, never the shared Redis


def fresh_session() -> str:
    """A session id of its own (Redis outlives the test database)."""
    return "ses-" + secrets.token_hex(6)


def test_a_hot_session_reads_the_shared_cache_once_per_window(
    seam: Issuer, reads: list[str], clock: Clock
) -> None:
    key = DPoPKey()
    token = seam.token(jkt=key.thumbprint, now=NOW, sid=fresh_session())
    for _ in range(5):
        assert read(token, key).status_code == 404
    assert (len(ASKED), len(reads)) == (1, 1)
    clock.now = NOW + 4.9
    assert read(token, key).status_code == 404
    assert (len(ASKED), len(reads)) == (1, 1)
    clock.now = NOW + 5  # the window is over, for the shared answer too: asked again
    for _ in range(3):
        assert read(token, key).status_code == 404
    assert (len(ASKED), len(reads)) == (2, 2)


def test_an_answer_is_not_used_past_its_window_by_a_process_that_read_it_late(
    seam: Issuer, reads: list[str], clock: Clock
) -> None:
    key = DPoPKey()
    session_id = fresh_session()
    token = seam.token(jkt=key.thumbprint, now=NOW, sid=session_id)
    assert read(token, key).status_code == 404  # asked at NOW, shared with (status, NOW)
    ENDED.add(session_id)
    sessions.forget()  # another process, its memo empty, reads the shared answer late
    clock.now = NOW + 4
    assert read(token, key).status_code == 404
    clock.now = NOW + 4.9
    assert read(token, key).status_code == 404
    assert (len(ASKED), len(reads)) == (1, 2)  # the late read was remembered
    clock.now = NOW + 5  # not NOW + 4 + 5: the window counts from when the callable answered
    response = read(token, key)
    assert_refused(response, 401, "invalid_token")
    assert "session revoked" in response.json()["error_description"]
    assert len(ASKED) == 2


def test_an_answer_stamped_by_a_clock_ahead_of_this_one_is_not_remembered(
    seam: Issuer, reads: list[str], clock: Clock
) -> None:
    """Its window cannot be placed on this clock: the shared cache's own expiry bounds it."""
    key = DPoPKey()
    token = seam.token(jkt=key.thumbprint, now=NOW, sid=fresh_session())
    clock.now = NOW + 60  # a machine whose clock runs a minute ahead answers first
    assert read(token, key).status_code == 404
    sessions.forget()
    clock.now = NOW
    for _ in range(3):
        assert read(token, key).status_code == 404
    assert (len(ASKED), len(reads)) == (1, 4)


def test_entries_of_earlier_versions_and_of_this_one_never_meet(
    seam: Issuer, reads: list[str]
) -> None:
    """Earlier versions cache a bare status under another key and return whatever they read
    there: a rolling upgrade must not show them the new (status, asked_at) entries, nor this
    version their bare strings."""
    key = DPoPKey()
    session_id = fresh_session()
    token = seam.token(jkt=key.thumbprint, now=NOW, sid=session_id)
    about = f"{session_id}\0False\0None"
    old_key = "poppy:session-status:" + hashlib.sha256(about.encode()).hexdigest()
    cache = shared_cache(CACHE_ALIAS)
    assert read(token, key).status_code == 404
    assert cache.get(old_key) is None  # nothing an earlier process would misread
    cache.set(old_key, "ended", timeout=5)  # an earlier process's ended session
    sessions.forget()  # another process of this version, once its own entry has expired
    cache.delete(reads[0])
    assert read(token, key).status_code == 404  # it asks, and hears the session is active
    assert len(ASKED) == 2


def test_a_settings_change_forgets_the_memo(settings: Any, seam: Issuer, reads: list[str]) -> None:
    """Tests start afresh by emptying the shared cache and changing settings."""
    key = DPoPKey()
    session_id = fresh_session()
    token = seam.token(jkt=key.thumbprint, now=NOW, sid=session_id)
    assert read(token, key).status_code == 404
    ENDED.add(session_id)
    shared_cache(CACHE_ALIAS).delete(reads[0])
    cache_seconds(settings, 60)
    assert_refused(read(token, key), 401, "invalid_token")


def test_the_memo_keeps_the_most_recently_used_sessions(
    seam: Issuer, reads: list[str], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sessions, "MEMO_ENTRIES", 2)
    key = DPoPKey()
    first, second, third = (
        seam.token(jkt=key.thumbprint, now=NOW, sid=fresh_session()) for _ in range(3)
    )
    for token in (first, second, first, third, first):  # the third pushes the second out
        assert read(token, key).status_code == 404
    assert len(reads) == 3
    assert read(second, key).status_code == 404
    assert len(reads) == 4


# -- the development authority, end to end --------------------------------------------------


@pytest.fixture
def dev(settings: Any, tmp_path: Path) -> Iterator[None]:
    settings.DEBUG = True  # the development authority runs with DEBUG only
    settings.POPPY = {
        **settings.POPPY,
        "AUTHENTICATE": "poppy_django.verifier.dpop.verify",
        "BASE_URL": BASE_URL,
        "ISSUER": None,
        "TOKENS": {},
        "DEV_AUTHORITY": {"KEY_FILE": str(tmp_path / "dev-key.pem")},
        # What the example project configures, with no cache window for the test.
        "SESSION_STATUS": "poppy_django.authority.status.session_is_active",
        "SESSION_STATUS_CACHE_SECONDS": 0,
    }
    dpop.reset()
    yield
    dpop.reset()


def poppy_token(*args: str) -> str:
    out = io.StringIO()
    call_command("poppy_token", *args, stdout=out)
    return out.getvalue().strip().splitlines()[-1]


def post_start(token: str, key: DPoPKey) -> Any:
    return Client().post(
        PATH,
        data={"message": {"id": secrets.token_hex(4), "sender": "agent", "text": "hi"}},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"DPoP {token}",
        HTTP_DPOP=key.proof("POST", ENDPOINT_URL, access_token=token),
    )


def get_events(token: str, key: DPoPKey, conversation_id: str) -> Any:
    url = f"{ENDPOINT_URL}/{conversation_id}/events"
    return Client().get(
        f"{PATH}/{conversation_id}/events",
        HTTP_AUTHORIZATION=f"DPoP {token}",
        HTTP_DPOP=key.proof("GET", url, access_token=token),
    )


@pytest.mark.django_db(transaction=True)
def test_poppy_token_revoke_ends_the_session_over_http(dev: None) -> None:
    from poppy_django.engine.executors import ThreadExecutor

    key = DPoPKey()
    token = poppy_token("--user", "u-rev", f"--jkt={key.thumbprint}", "--session", "ses_rev")
    kept = poppy_token("--user", "u-rev", f"--jkt={key.thumbprint}", "--session", "ses_kept")
    started = post_start(token, key)
    assert started.status_code == 201, started.content
    conversation_id = started.json()["conversation_id"]
    ThreadExecutor.shutdown(wait=True)
    assert get_events(token, key, conversation_id).status_code == 200

    assert poppy_token("--revoke", "ses_rev") == "Revoked session ses_rev."
    response = get_events(token, key, conversation_id)
    assert_refused(response, 401, "invalid_token")
    assert "session revoked" in response.json()["error_description"]
    assert_refused(post_start(token, key), 401, "invalid_token")
    # The same User's other session is untouched; revoking twice says so.
    assert get_events(kept, key, conversation_id).status_code == 200
    assert poppy_token("--revoke", "ses_rev") == "Session ses_rev was already revoked."


def test_revoke_refuses_a_malformed_session_id(dev: None) -> None:
    from django.core.management import CommandError

    with pytest.raises(CommandError):
        poppy_token("--revoke", "not a session id")


# -- revocations announced by the issuer take effect at the next request -------------------


def test_a_revocation_announced_takes_effect_at_the_next_request_inside_the_window(
    seam: Issuer, reads: list[str], clock: Clock
) -> None:
    key = DPoPKey()
    session_id = fresh_session()
    token = seam.token(jkt=key.thumbprint, now=NOW, sid=session_id)
    assert read(token, key).status_code == 404
    assert read(token, key).status_code == 404
    assert len(ASKED) == 1  # memoized
    ENDED.add(session_id)
    sessions.revoked(session_id)
    clock.now = NOW + 1
    assert_refused(read(token, key), 401, "invalid_token")
    assert len(ASKED) == 2


def test_another_processs_shared_answer_asked_before_the_revocation_is_not_used(
    seam: Issuer, reads: list[str], clock: Clock
) -> None:
    key = DPoPKey()
    session_id = fresh_session()
    token = seam.token(jkt=key.thumbprint, now=NOW, sid=session_id)
    assert read(token, key).status_code == 404  # shared as (active, NOW)
    ENDED.add(session_id)
    clock.now = NOW + 1
    sessions.revoked(session_id)
    sessions.forget()  # another process, its memo empty, finds the shared answer
    clock.now = NOW + 2
    assert_refused(read(token, key), 401, "invalid_token")
    assert len(ASKED) == 2


@pytest.fixture
def bus(settings: Any) -> Iterator[None]:
    """The fan-out bus's Redis (EVENTSTREAM_REDIS), as in production mode."""
    import redis

    parts = redis.connection.parse_url(REDIS_CACHE["LOCATION"])
    settings.EVENTSTREAM_REDIS = {
        **{k: parts[k] for k in ("host", "port", "db") if k in parts},
        "socket_connect_timeout": 1,
    }
    yield


def test_over_redis_a_process_memoizes_only_once_it_hears_revocations(
    seam: Issuer, reads: list[str], bus: None
) -> None:
    from poppy_django.verifier import revocations

    key = DPoPKey()
    session_id = fresh_session()
    token = seam.token(jkt=key.thumbprint, now=NOW, sid=session_id)

    def subscribed() -> bool:
        if revocations.listening(sessions.forget_sessions):
            return True
        assert read(token, key).status_code == 404  # served, from the shared cache
        return False

    eventually(subscribed, timeout=10, what="the revocation subscription to start")
    before = len(reads)
    for _ in range(3):
        assert read(token, key).status_code == 404
    assert len(reads) <= before + 1  # memoized once subscribed
    ENDED.add(session_id)
    sessions.revoked(session_id)  # published; returns once this process acknowledged it
    assert_refused(read(token, key), 401, "invalid_token")


def test_with_redis_unreachable_nothing_is_memoized(
    settings: Any, seam: Issuer, reads: list[str]
) -> None:
    from poppy_django.verifier import revocations

    settings.EVENTSTREAM_REDIS = {"host": "127.0.0.1", "port": 1, "socket_connect_timeout": 0.2}
    key = DPoPKey()
    session_id = fresh_session()
    token = seam.token(jkt=key.thumbprint, now=NOW, sid=session_id)
    for _ in range(3):
        assert read(token, key).status_code == 404
    assert not revocations.listening(sessions.forget_sessions)
    assert len(reads) == 3  # the shared cache per request, never the memo
    ENDED.add(session_id)
    sessions.revoked(session_id)  # cannot be published: logged; the mark still counts
    assert_refused(read(token, key), 401, "invalid_token")
