"""A company check for Mediated Sign-In that sends a one-time code (the tests' stand-in).

``POPPY_AUTHORITY["MEDIATED_CHECK"] = "tests.authority.mediated_checks.with_a_code"``: the
username and password as Django's check has them, then a code "sent" to the User (here:
kept in :data:`SENT` for the test to type in, as the User would read it from a text).
:func:`text_code` is the same stand-in as a ``MEDIATED_SEND_CODE`` for the default check.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from django.http import HttpRequest

from poppy_django.authority.mediated import Authenticated, CodeRequired, django_check

#: account -> the last code "sent" to it
SENT: dict[str, str] = {}


def with_a_code(request: HttpRequest, credentials: Mapping[str, str]) -> CodeRequired | None:
    checked = django_check(request, credentials)
    if not isinstance(checked, Authenticated):
        return None
    code = f"{secrets.randbelow(10**6):06d}"
    SENT[checked.account_id] = code
    return CodeRequired(checked.account_id, code, sent_to="+1 *** *** 42")


def text_code(request: HttpRequest, account_id: str, code: str) -> str:
    """``POPPY_AUTHORITY["MEDIATED_SEND_CODE"]``: the default's code "texted" (kept in
    :data:`SENT`) instead of e-mailed."""
    SENT[account_id] = code
    return "+1 *** *** 42"
