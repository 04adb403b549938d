"""Sign-in attempts: counted before they are checked, refused past a limit, locked out longer
each time, or stepped up.

An attempt is counted against its counters (the Session, the pairwise User, the account it
names, then the client and the address) **first**, atomically
(:func:`poppy_django.store.windows.count`), and only an attempt that every count admits is
checked: so N concurrent attempts check at most the limit, never N. A counter that **locks
out** (what one caller owns: its Session, its User, an account as this client tries it)
refuses the attempt past its limit, and the one attempt that crossed it locks it out for
``window * 2**(strikes - 1)`` seconds, up to a day, where ``strikes`` counts its lockouts of
the last day: the lockout doubles each time guessing resumes after one, and a burst of
concurrent attempts past the limit is one strike, not one each. A locked counter refuses
without counting or checking.

A counter many callers **share** (a client's Users, an address's agents, an account across
every client) never refuses: past its limit it is a *doubt* (:func:`admit` returns it), and
the attempt is checked but must step up (a one-time code) to sign in. Locking those out
would let anyone lock everyone out (OWASP's credential-stuffing guidance: slow down and
step up, never a lockout anyone can aim at others).

A sign-in that succeeds clears what it names (Session, User, account) and takes its own
count back from the shared counters, which keep counting the failures only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from poppy_django.process_cache import shared_cache
from poppy_django.store import windows

#: The longest lockout.
DAY = 86400


@dataclass(frozen=True)
class Counter:
    """One thing attempts count against, and how many a window allows."""

    name: str
    limit: int
    #: Cleared by a success (it names what signed in); else the success's count is taken back.
    cleared_by_success: bool = True
    #: Past its limit the attempt is refused and the counter locked out; False (a counter
    #: many callers share): the attempt is checked, and must step up (:func:`admit`).
    locks_out: bool = True


class Locked(Exception):
    """Refused: a counter is past its limit or locked out; retry after ``seconds``."""

    def __init__(self, seconds: int, counters: Sequence[str]) -> None:
        super().__init__(f"locked for {seconds} s")
        self.seconds = seconds
        self.counters = tuple(counters)


def _lock_key(name: str) -> str:
    return f"lock:{name}"


def _strikes_key(name: str) -> str:
    return f"strikes:{name}"


def locked_for(name: str, alias: str) -> int:
    """Seconds left of ``name``'s lockout (0: none)."""
    until = shared_cache(alias).get(windows.key(_lock_key(name)))
    return max(0, math.ceil(float(until) - time.time())) if until is not None else 0


def _lock(name: str, window: float, alias: str) -> int:
    """Lock ``name`` out (longer at each strike of the day); the seconds it lasts."""
    strikes = windows.count(_strikes_key(name), seconds=DAY, alias=alias)
    seconds = int(min(DAY, math.ceil(window) * 2 ** (strikes - 1)))
    shared_cache(alias).set(windows.key(_lock_key(name)), time.time() + seconds, timeout=seconds)
    return seconds


def admit(counters: Sequence[Counter], *, window: float, alias: str) -> list[str]:
    """Count one attempt against the counters in order, refusing (:class:`Locked`) at the
    first locking counter that is locked out or past its limit (the later ones are not
    charged for it); only an attempt every locking counter admitted may be checked. Returns
    the shared counters past their limits: the attempt must step up to sign in."""
    locking = [c for c in counters if c.locks_out]
    locked = {c.name: locked_for(c.name, alias) for c in locking}
    if any(locked.values()):
        raise Locked(max(locked.values()), [name for name, left in locked.items() if left])
    doubts = []
    for counter in counters:
        over = windows.count(counter.name, seconds=window, alias=alias) - counter.limit
        if over <= 0:
            continue
        if not counter.locks_out:
            doubts.append(counter.name)
            continue
        raise Locked(_strike(counter.name, over, window, alias), [counter.name])
    return doubts


def _strike(name: str, over: int, window: float, alias: str) -> int:
    """Seconds the attempt ``over`` the limit of ``name`` is refused for: the one attempt
    that crossed it (``over`` 1: each count is one attempt's alone) locks ``name`` out, one
    strike however many came at once; the later ones are told what is left of that lockout
    (or of the window, while the crossing attempt has not set it yet)."""
    if over == 1:
        return _lock(name, window, alias)
    return locked_for(name, alias) or windows.retry_after(name, seconds=window, alias=alias)


def succeeded(counters: Sequence[Counter], *, alias: str) -> None:
    """The attempt signed in: clear what it named, take its count back from the rest."""
    for counter in counters:
        if counter.cleared_by_success:
            for name in (counter.name, _strikes_key(counter.name), _lock_key(counter.name)):
                windows.clear(name, alias=alias)
        else:
            windows.uncount(counter.name, alias=alias)
