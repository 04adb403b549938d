"""Mediated Sign-In's default second step: when to ask for a one-time code, and how to send it.

PAP-4.7-04: a company SHOULD require a one-time code when a sign-in looks unusual. The
view (:mod:`poppy_django.authority.mediated`) asks ``MEDIATED_CODE_WHEN`` (default
:func:`looks_unusual`) about every sign-in whose check answered ``Authenticated``, and sends
the code through ``MEDIATED_SEND_CODE`` (default :func:`email_code`).

Apart from the view so that the settings' defaults import without the authority extra
(Authlib): ``manage.py check`` validates every import string, also where only the
development authority runs.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.http import HttpRequest
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables

from poppy_django.authority.conf import authority_settings
from poppy_django.authority.models import Grant, Session
from poppy_django.authority.website import user_for_account
from poppy_django.conf import organization_name

logger = logging.getLogger("poppy_django.authority")


def looks_unusual(
    request: HttpRequest, session: Session, account_id: str, *, earlier_failures: int
) -> bool:
    """The default ``MEDIATED_CODE_WHEN``: the right password came after wrong ones in this
    window (someone may have been guessing), or this client (the personal agent) has never
    signed this account in before, by any method, signed out since or not (the password may
    have leaked to a stranger's agent)."""
    if earlier_failures > 0:
        return True
    return not Grant.objects.filter(
        client_id=session.client_id, account_id=account_id, created_at__lt=timezone.now()
    ).exists()


def _user_of(account_id: str) -> Any:
    """The active Django user of ``account_id``, or None.

    ``USER_FOR_ACCOUNT`` (the inverse of ``ACCOUNT_ID``) when set, else the user whose
    username is the account id. A custom ``ACCOUNT_ID`` without ``USER_FOR_ACCOUNT`` has no
    knowable inverse: the user found by username is taken only if ``ACCOUNT_ID`` maps it
    back to ``account_id``, so a code never goes to someone whose username happens to be
    another account's id.
    """
    options = authority_settings()
    user = user_for_account(account_id)
    if user is None or not getattr(user, "is_active", False):
        return None
    hook = options.ACCOUNT_ID
    if hook is not None and options.USER_FOR_ACCOUNT is None and str(hook(user)) != account_id:
        return None
    return user


def _masked(address: str) -> str:
    """An e-mail address as a ``code_required`` answer may show it: ``a•••@example.com``."""
    local, _, domain = address.rpartition("@")
    return f"{local[:1]}•••@{domain}" if local and domain else "•••"


@sensitive_variables("code")
def email_code(request: HttpRequest, account_id: str, code: str) -> str | None:
    """The default ``MEDIATED_SEND_CODE``: e-mail ``code`` to the account's user (see
    :func:`_user_of` for how the user is found) with Django's ``send_mail``.

    Where it went, masked; None when the user has no e-mail address or the mail could not
    be handed to the e-mail backend (the sign-in then goes on without a code). The code is
    never logged.
    """
    user = _user_of(account_id)
    if user is None:
        return None
    field = user.get_email_field_name() if hasattr(user, "get_email_field_name") else "email"
    address = str(getattr(user, field, "") or "").strip()
    if not address:
        return None
    company = organization_name()
    minutes = max(1, math.ceil(float(authority_settings().MEDIATED_CODE_SECONDS) / 60))
    lasts = f"{minutes} minute{'s' if minutes != 1 else ''}"
    body = (
        f"Your one-time code for signing your personal agent in to {company}: {code}\n\n"
        f"It lasts {lasts}. If you are not signing an agent in, give it to no one: someone "
        "may know your password, so change it.\n"
    )
    try:
        send_mail(f"Your {company} sign-in code", body, settings.DEFAULT_FROM_EMAIL, [address])
    except Exception as exc:  # any backend's failure (SMTP, an API): no code, not a 500
        logger.error("A Mediated Sign-In code could not be e-mailed (%s)", type(exc).__name__)
        return None
    return _masked(address)
