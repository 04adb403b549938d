"""An agent's sign-in bound to the account as it stood when the User approved it.

Django ends a person's own sessions when their password changes: each session keeps the
user's ``get_session_auth_hash()`` (an HMAC of the password hash, or whatever the project's
user model makes it) and is refused once it differs. A sign-in an agent holds is bound the
same way: every approval (a Device Sign-In approved, a Direct Sign-In code, a Mediated
Sign-In waiting for its code) and every grant made from one records the user who approved it
and a digest of that hash. Exchange, refresh and the session-status seam ask
:func:`stands`: a bound approval whose user is gone or inactive, or whose password changed
since, no longer signs anyone in. That holds for changes no signal reports (a bulk
``User.objects.filter(...).update(is_active=False)``, a directory sync, a script), which
:mod:`poppy_django.authority.account_changes` cannot see.

An approval with no user (a ``MEDIATED_CHECK`` of the company's own that names no Django
user, or one recorded before these fields existed) is unbound: only revocation ends it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


def _digests(user: Any) -> Iterator[str]:
    """Digests of the user's session auth hash under the current key, then the fallbacks
    (``SECRET_KEY_FALLBACKS``: a rotated key keeps sign-ins, as it keeps Django sessions)."""
    current = getattr(user, "get_session_auth_hash", None)
    if current is None:
        return
    yield hashlib.sha256(current().encode()).hexdigest()
    for fallback in getattr(user, "get_session_auth_fallback_hash", lambda: ())():
        yield hashlib.sha256(fallback.encode()).hexdigest()


#: The state of an approval by a user whose model has no session auth hash: only its
#: ``is_active`` (and its existence) is checked.
UNHASHED = "unhashed"


def state_of(user: Any) -> str:
    """What an approval by ``user`` is bound to; "" (unbound) when there is no user."""
    if user is None:
        return ""
    return next(_digests(user), UNHASHED)


def stands(user: Any, state: str) -> bool:
    """Whether an approval bound to ``state`` still signs in: unbound (""), or its user
    still exists, is active and has the session auth hash it had."""
    if not state:
        return True
    if user is None or not getattr(user, "is_active", True):
        return False
    if state == UNHASHED:
        return True
    return any(hmac.compare_digest(state, digest) for digest in _digests(user))


@dataclass(frozen=True)
class Approval:
    """Who approved a sign-in (a user's primary key, None for none) and the state it is
    bound to: what a grant made from the approval keeps."""

    user_pk: Any
    state: str

    @classmethod
    def by(cls, user: Any) -> Approval:
        """The approval of ``user`` now (None: an unbound one)."""
        return cls(getattr(user, "pk", None), state_of(user))


UNBOUND = Approval(None, "")
