"""Sign-in attempt counters (:mod:`poppy_django.authority.attempts`) through their Python API:
lockouts that double each time guessing resumes, up to a day, and a success that forgives.

The HTTP behaviour (concurrent attempts, stuffing across Sessions, ``account_mismatch``) is
proven against the example project as shipped in ``test_channel_limits.py``; here a window
of one second lets the escalation itself be watched.
"""

from __future__ import annotations

import pytest
from django.core.cache import caches

from poppy_django.authority import attempts
from tests.waiting import eventually

ALIAS = "default"


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    caches[ALIAS].clear()


def locked_after_guessing(counters: list[attempts.Counter], window: float) -> int:
    """Guess until refused (waiting out a lockout first): the refusal's lockout seconds."""

    def admitted_or_locked() -> int | None:
        try:
            attempts.admit(counters, window=window, alias=ALIAS)
        except attempts.Locked as locked:
            return locked.seconds if locked.counters == (counters[0].name,) else None
        return None

    eventually(lambda: _not_locked(counters), timeout=30, what="the lockout to end")
    return int(eventually(admitted_or_locked, timeout=30, what="a refusal"))


def _not_locked(counters: list[attempts.Counter]) -> bool:
    return all(attempts.locked_for(c.name, ALIAS) == 0 for c in counters)


def test_the_limit_then_a_lockout_that_doubles_each_time() -> None:
    counters = [attempts.Counter("test:escalating", 2)]
    assert [locked_after_guessing(counters, 1.0) for _ in range(3)] == [1, 2, 4]


def test_a_lockout_refuses_without_counting_and_lasts_at_most_a_day() -> None:
    counters = [attempts.Counter("test:day", 1)]
    window = 2 * attempts.DAY
    attempts.admit(counters, window=window, alias=ALIAS)
    with pytest.raises(attempts.Locked) as first:
        attempts.admit(counters, window=window, alias=ALIAS)
    with pytest.raises(attempts.Locked) as again:
        attempts.admit(counters, window=window, alias=ALIAS)
    assert first.value.seconds == attempts.DAY
    assert 0 < again.value.seconds <= first.value.seconds  # the same lockout, not a longer one


def test_a_later_counter_is_not_charged_for_an_attempt_an_earlier_one_refused() -> None:
    session = attempts.Counter("test:session", 1)
    address = attempts.Counter("test:address", 10, cleared_by_success=False)
    attempts.admit([session, address], window=60, alias=ALIAS)
    for _ in range(5):
        with pytest.raises(attempts.Locked):
            attempts.admit([session, address], window=60, alias=ALIAS)
    fresh = attempts.Counter("test:other-session", 1)
    attempts.admit([fresh, address], window=60, alias=ALIAS)  # the address took 2, not 7


def test_a_success_clears_what_it_named_and_gives_back_its_own_count() -> None:
    session = attempts.Counter("test:forgiven", 2)
    address = attempts.Counter("test:shared", 2, cleared_by_success=False)
    counters = [session, address]
    attempts.admit(counters, window=60, alias=ALIAS)
    attempts.succeeded(counters, alias=ALIAS)
    attempts.admit(counters, window=60, alias=ALIAS)
    attempts.admit(counters, window=60, alias=ALIAS)  # the address's third, one given back
    with pytest.raises(attempts.Locked) as refused:
        attempts.admit(counters, window=60, alias=ALIAS)
    assert refused.value.counters == (session.name,)
