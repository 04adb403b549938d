"""Sign-in attempts: counted before they are checked, refused past a limit, locked out longer
each time.

An attempt is counted against its counters (the Session, the pairwise User, the account it
names, then the client and the address) **first**, atomically
(:func:`poppy_django.store.windows.count`), and only an attempt that every count admits is
checked: so N concurrent attempts check at most the limit, never N. One past a counter's
limit locks that counter out for ``window * 2**(strikes - 1)`` seconds, up to a day, where
``strikes`` counts its lockouts of the last day: the lockout doubles each time guessing
resumes after one. A locked counter refuses without counting or checking. A sign-in that
succeeds clears what it names (Session, User, account) and takes its own count back from
the client's and the address's, which keep counting the failures only.
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


def admit(counters: Sequence[Counter], *, window: float, alias: str) -> None:
    """Count one attempt against the counters in order, refusing (:class:`Locked`) at the
    first that is locked out or past its limit (the later ones are not charged for it);
    only an attempt every counter admitted may be checked."""
    locked = {c.name: locked_for(c.name, alias) for c in counters}
    if any(locked.values()):
        raise Locked(max(locked.values()), [name for name, left in locked.items() if left])
    for counter in counters:
        if windows.count(counter.name, seconds=window, alias=alias) > counter.limit:
            raise Locked(_lock(counter.name, window, alias), [counter.name])


def succeeded(counters: Sequence[Counter], *, alias: str) -> None:
    """The attempt signed in: clear what it named, take its count back from the rest."""
    for counter in counters:
        if counter.cleared_by_success:
            for name in (counter.name, _strikes_key(counter.name), _lock_key(counter.name)):
                windows.clear(name, alias=alias)
        else:
            windows.uncount(counter.name, alias=alias)
