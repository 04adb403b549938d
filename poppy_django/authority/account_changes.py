"""Agent sign-ins end when the account changes: a new password (changed or reset), a
deactivated or deleted user.

Every grant of the account is revoked in the same transaction as the change
(:func:`poppy_django.authority.grants.revoke_grants`): its Account Tokens stop working, every
Session signed in from it is signed out at its next request (every process is told once the
change commits), and a browser joined to one of them is a visitor at its next request. The
approvals not yet exchanged are voided with them: a Device Sign-In approved but not yet
polled, a Direct Sign-In code not yet exchanged, a Mediated Sign-In waiting for its one-time
code (RFC 8628 §5.4: a stranger's device code the User approved by mistake must not sign the
stranger in after the User changed the password). A personal agent must ask the User to sign
in again, with the new password. Connected in
:meth:`poppy_django.authority.apps.AuthorityConfig.ready` for ``AUTH_USER_MODEL``.

Signals see changes made through ``save()`` and ``delete()`` only; a bulk ``update()`` is
caught where the sign-in is used instead (:mod:`poppy_django.authority.account_state`).
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_save
from django.utils import timezone

from poppy_django.authority import grants
from poppy_django.authority.models import (
    AuthorizationCode,
    DeviceAuthorization,
    Grant,
    MediatedSignIn,
)

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
    """Revoke every agent sign-in of ``user``'s account and void its approvals not yet
    exchanged, in one transaction; how many grants ended."""
    account, now = grants.account_id_of(user), timezone.now()
    with transaction.atomic():
        ended = grants.revoke_grants(Grant.objects.filter(account_id=account, revoked_at=None))
        voided = (
            DeviceAuthorization.objects.filter(account_id=account, used_at=None, denied=False)
            .exclude(expires_at__lte=now)
            .update(denied=True)
        )
        voided += AuthorizationCode.objects.filter(
            account_id=account, used_at=None, expires_at__gt=now
        ).update(expires_at=now)
        voided += MediatedSignIn.objects.filter(
            account_id=account, status=MediatedSignIn.Status.CODE_REQUIRED
        ).update(status=MediatedSignIn.Status.FAILED)
    if ended or voided:
        logger.info(
            "Ended %d agent sign-in(s) and voided %d approval(s) of an account: %s",
            ended,
            voided,
            why,
        )
    return ended


def connect() -> None:
    """Watch the project's user model (``AUTH_USER_MODEL``)."""
    model = get_user_model()
    pre_save.connect(_before_save, sender=model, dispatch_uid="poppy_authority_pre_save")
    post_save.connect(_after_save, sender=model, dispatch_uid="poppy_authority_post_save")
    post_delete.connect(_after_delete, sender=model, dispatch_uid="poppy_authority_post_delete")
