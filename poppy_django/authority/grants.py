"""Sign-ins (grants) and their Account Tokens: signing Sessions in, rotation, sign-out.

An Account Token is a long-lived refresh credential, returned once and kept here only as a
hash. Each refresh rotates it: the old one is ``invalid_grant`` from then on, and presenting
it again revokes the whole sign-in (RFC 9700 §4.14.2: one of the two holders of the token
family is an attacker, and we cannot tell which). Revoking any token of a grant revokes the
grant, and every Session signed in from it continues signed out (its tokens are refused at
the next request through the session-status seam).
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any, Protocol

from authlib.oauth2.rfc6749 import InvalidGrantError, InvalidScopeError
from django.db import transaction
from django.utils import timezone

from poppy_django.authority.account_state import UNBOUND, Approval
from poppy_django.authority.conf import authority_settings
from poppy_django.authority.errors import AccountMismatchError, InvalidSessionError
from poppy_django.authority.models import AccountToken, Client, Grant, Session
from poppy_django.verifier import sessions as session_status


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class AccountId(Protocol):
    """``POPPY_AUTHORITY["ACCOUNT_ID"]``: the account a Django user signs in to."""

    def __call__(self, user: Any, /) -> str: ...


def account_id_of(user: Any) -> str:
    """The account a signed-in Django user is: ``POPPY_AUTHORITY["ACCOUNT_ID"]``, else the
    username."""
    hook: AccountId | None = authority_settings().ACCOUNT_ID
    return str(hook(user)) if hook else str(user.get_username())


def new_account_token(grant: Grant) -> str:
    """A fresh Account Token of ``grant`` (the only time its value exists here)."""
    token = secrets.token_urlsafe(32)
    AccountToken.objects.create(grant=grant, token_hash=token_hash(token))
    return token


def sign_in(session: Session, grant: Grant, scope: str, jkt: str | None) -> Session:
    """Sign ``session`` in from ``grant`` with ``scope``, its token bound to ``jkt`` (None:
    a Bearer MCP token is issued and the Session keeps its key)."""
    if session.user_id != grant.user_id or session.client_id != grant.client_id:
        raise InvalidSessionError("The Session is another User's or another client's.")
    if session.ended_at is not None:
        raise InvalidSessionError("The Session has ended.")
    if session.account_id not in (None, grant.account_id):
        raise AccountMismatchError("The Session belongs to another account.")
    session.account_id = grant.account_id
    session.grant = grant
    session.scope = scope
    session.jkt = session.jkt if jkt is None else jkt
    session.renewed_at = timezone.now()
    session.save(update_fields=["account_id", "grant", "scope", "jkt", "renewed_at"])
    return session


def locked_session(client: Client, session_id: str) -> Session:
    """The client's Session ``session_id``, locked for this transaction."""
    session = (
        Session.objects.select_for_update()
        .filter(session_id=session_id, client=client, ended_at=None)
        .first()
    )
    if session is None:
        raise InvalidSessionError("The Session is unknown or has ended.")
    return session


def consented(
    client: Client,
    session_id: str,
    *,
    account_id: str,
    scope: str,
    method: str,
    jkt: str,
    approval: Approval = UNBOUND,
) -> tuple[Session, str]:
    """A sign-in the User consented to (Device, Direct or Mediated): the grant recorded
    (bound to ``approval``'s user and account state: refreshed only while they stand), the
    Session signed in from it, and the Account Token (its value) that signs later Sessions
    in."""
    session = locked_session(client, session_id)
    grant = Grant.objects.create(
        client=client,
        user_id=session.user_id,
        account_id=account_id,
        scope=scope,
        method=method,
        approved_by_id=approval.user_pk,
        account_state=approval.state,
    )
    sign_in(session, grant, grant.scope, jkt)
    return session, new_account_token(grant)


def narrowed_scope(granted: str, requested: str | None) -> str:
    """The scope a refresh asks for, never wider than the grant (then ``invalid_scope``)."""
    if requested is None:
        return granted
    wanted = list(dict.fromkeys(requested.split()))
    if not set(wanted) <= set(granted.split()):
        raise InvalidScopeError("The scope is wider than the sign-in allowed: sign in again.")
    return " ".join(wanted)


def refresh(
    client: Client, token: str, session_id: str, requested: str | None, jkt: str | None
) -> tuple[Session, str]:
    """Sign a Session in with an Account Token; the Session and the rotated token.

    A rotated token presented again (by this client) revokes its sign-in, then is refused; so
    is one whose approval no longer stands (its user deactivated or its password changed,
    by any path, signals or not).
    """
    with transaction.atomic():
        current = (
            AccountToken.objects.select_for_update()
            .select_related("grant")
            .filter(token_hash=token_hash(token))
            .first()
        )
        live = (
            current is not None
            and current.grant.client_id == client.pk
            and current.grant.revoked_at is None
        )
        if live and current is not None and not current.grant.approval_stands():
            revoke_grants(Grant.objects.filter(pk=current.grant_id))  # committed
        elif live and current is not None and current.rotated_at is None:
            grant = current.grant
            if grant.rebind():  # it stood by a fallback SECRET_KEY
                grant.save(update_fields=["account_state"])
            session = locked_session(client, session_id)
            scope = narrowed_scope(grant.scope, requested)
            sign_in(session, grant, scope, jkt)
            current.rotated_at = timezone.now()
            current.save(update_fields=["rotated_at"])
            return session, new_account_token(grant)
        elif live and current is not None:  # rotated, presented again: revoked (committed)
            revoke_grants(Grant.objects.filter(pk=current.grant_id))
    raise InvalidGrantError("The Account Token is not valid.")


def revoke_grants(grants: Any) -> int:
    """Sign out: revoke the grants and sign out every Session signed in from them."""
    with transaction.atomic():
        ids = list(grants.filter(revoked_at=None).values_list("pk", flat=True))
        Grant.objects.filter(pk__in=ids).update(revoked_at=timezone.now())
        signed_in = Session.objects.filter(grant_id__in=ids)
        session_ids = list(signed_in.values_list("session_id", flat=True))
        signed_in.update(grant=None, scope="")
        # Every process drops what it remembered of them before the sign-out answers.
        transaction.on_commit(lambda: session_status.revoked(*session_ids))
    return len(ids)


def revoke_account_token(client: Client, token: str) -> bool:
    """RFC 7009 for an Account Token of ``client`` (rotated ones too): its grant ends."""
    found = (
        AccountToken.objects.select_related("grant")
        .filter(token_hash=token_hash(token), grant__client=client)
        .first()
    )
    if found is None:
        return False
    revoke_grants(Grant.objects.filter(pk=found.grant_id))
    return True
