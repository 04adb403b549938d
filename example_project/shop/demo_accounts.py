"""The example's demo customers, acct-1 and acct-2, who log in with a published password.

A published password is a demo's convenience and a production's open door, so the accounts
exist only while the project says it is a demo (``ACME_DEMO_ACCOUNTS``: on with DEBUG, or
``ACME_DEMO_ACCOUNTS=1``). They are made (or opened again) after every ``migrate`` while it
is on; once it is off, the next ``migrate`` takes the published password away from an account
that still has it (an account whose password someone changed keeps its own).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password

ACCOUNTS = ("acct-1", "acct-2")
PASSWORD = "acme-demo"


def enabled() -> bool:
    """Whether the project says it is a demo (the example's settings, from the environment)."""
    return bool(getattr(settings, "ACME_DEMO_ACCOUNTS", False))


def sync(*, using: str = "default", **_: Any) -> None:
    """``post_migrate``: make the demo accounts while a demo, else close them."""
    users = get_user_model()._default_manager.db_manager(using)
    if enabled():
        for username in ACCOUNTS:
            user, made = users.get_or_create(
                username=username, defaults={"password": make_password(PASSWORD)}
            )
            if not made and not user.has_usable_password():  # closed by an earlier migrate
                user.set_password(PASSWORD)
                user.save(update_fields=["password"])
        return
    for user in users.filter(username__in=ACCOUNTS):
        if user.has_usable_password() and user.check_password(PASSWORD):
            user.set_unusable_password()
            user.save(update_fields=["password"])
