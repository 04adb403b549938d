"""System checks of the authority's optional channels (browser sessions, Mediated Sign-In).

- ``E004``: ``BROWSER_SESSIONS`` is on but ``BrowserSessionMiddleware`` is not installed
  after Django's session and authentication middleware: sign-outs would not end browser
  sessions.
- ``E005``: ``MEDIATED_FIELDS`` is not a list of ``{"name", "label", "secret"}`` objects.
- ``W003``: browser sessions with ``DEBUG`` off and ``SESSION_COOKIE_SECURE`` off: the
  session cookie must be ``Secure`` (personal agents refuse one that is not).
- ``W004``: browser sessions with ``ACCOUNT_ID`` set but no ``USER_FOR_ACCOUNT``: the
  default finds users by username, which ``ACCOUNT_ID`` says the account id is not.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from poppy_django.authority.conf import authority_settings
from poppy_django.conf import debug_configured

MIDDLEWARE = "poppy_django.authority.website.BrowserSessionMiddleware"
NEEDED_BEFORE = (
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
)


def check_channels() -> list[Any]:
    options = authority_settings()
    problems: list[Any] = []
    if options.BROWSER_SESSIONS:
        stack = list(settings.MIDDLEWARE)
        if MIDDLEWARE not in stack or any(
            name not in stack or stack.index(name) > stack.index(MIDDLEWARE)
            for name in NEEDED_BEFORE
        ):
            problems.append(
                checks.Error(
                    "Browser sessions are on, but BrowserSessionMiddleware is not installed "
                    "after the session and authentication middleware.",
                    hint=f'Add "{MIDDLEWARE}" to MIDDLEWARE after AuthenticationMiddleware.',
                    id="poppy_authority.E004",
                )
            )
        if not debug_configured() and not settings.SESSION_COOKIE_SECURE:
            problems.append(
                checks.Warning(
                    "Browser sessions are on with SESSION_COOKIE_SECURE off.",
                    hint="Set SESSION_COOKIE_SECURE = True (the site is served over https).",
                    id="poppy_authority.W003",
                )
            )
        if options.ACCOUNT_ID and not options.USER_FOR_ACCOUNT:
            problems.append(
                checks.Warning(
                    "ACCOUNT_ID is set but USER_FOR_ACCOUNT is not: browser sessions look "
                    "users up by username.",
                    hint='Set POPPY_AUTHORITY["USER_FOR_ACCOUNT"], the inverse of ACCOUNT_ID.',
                    id="poppy_authority.W004",
                )
            )
    if options.MEDIATED_FIELDS:
        # Only then: Mediated Sign-In is the OAuth side's (the authority extra, Authlib).
        from poppy_django.authority import mediated

        try:
            mediated.fields()
        except ImproperlyConfigured as exc:
            problems.append(checks.Error(str(exc), id="poppy_authority.E005"))
    return problems
