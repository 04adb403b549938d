"""Agent sign-ins end when the account changes: a new password (changed or reset), a
deactivated or deleted user.

Every grant of the account is revoked in the same transaction as the change
(:func:`poppy_django.authority.grants.revoke_grants`): its Account Tokens stop working, every
Session signed in from it is signed out at its next request (every process is told once the
change commits), and a browser joined to one of them is a visitor at its next request. A
personal agent must ask the User to sign in again, with the new password. Connected in
:meth:`poppy_django.authority.apps.AuthorityConfig.ready` for ``AUTH_USER_MODEL``.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import post_delete, post_save, pre_save

from poppy_django.authority import grants
from poppy_django.authority.models import Grant

logger = logging.getLogger("poppy_django.authority")

#: The fields whose change ends the account's agent sign-ins.
WATCHED = frozenset({"password", "is_active"})
_ENDS = "_poppy_ends_sign_ins"


def _before_save(sender: Any, instance: Any, update_fields: Any = None, **kwargs: Any) -> None:
    """Note whether this save changes the password or deactivates the user."""
    if instance.pk is None or (update_fields is not None and not WATCHED & set(update_fields)):
        return  # a new user, or a save of other fields (a login's last_login)
    before = sender._default_manager.filter(pk=instance.pk).values("password", "is_active").first()
    if before is None:
        return
    setattr(
        instance,
        _ENDS,
        before["password"] != instance.password
        or (before["is_active"] and not getattr(instance, "is_active", True)),
    )


def _after_save(sender: Any, instance: Any, **kwargs: Any) -> None:
    if getattr(instance, _ENDS, False):
        setattr(instance, _ENDS, False)
        end_sign_ins(instance, "the password changed or the user was deactivated")


def _after_delete(sender: Any, instance: Any, **kwargs: Any) -> None:
    end_sign_ins(instance, "the user was deleted")


def end_sign_ins(user: Any, why: str) -> int:
    """Revoke every agent sign-in of ``user``'s account; how many grants ended."""
    ended = grants.revoke_grants(
        Grant.objects.filter(account_id=grants.account_id_of(user), revoked_at=None)
    )
    if ended:
        logger.info("Ended %d agent sign-in(s) of an account: %s", ended, why)
    return ended


def connect() -> None:
    """Watch the project's user model (``AUTH_USER_MODEL``)."""
    model = get_user_model()
    pre_save.connect(_before_save, sender=model, dispatch_uid="poppy_authority_pre_save")
    post_save.connect(_after_save, sender=model, dispatch_uid="poppy_authority_post_save")
    post_delete.connect(_after_delete, sender=model, dispatch_uid="poppy_authority_post_delete")
