"""Direct Sign-In (Poppy §4.4): OAuth authorization code with PKCE in the User's browser.

The authorization page validates the client and its exact redirect URI before anything
else (an unknown one is an error page, never a redirect), then the User logs in with the
project's Django auth and approves some or all of the requested scopes. The code is short
lived, bound to the redirect URI and the S256 challenge, and exchanged once: presented
again, it revokes the sign-in its first use made (RFC 6749 §4.1.2).
"""

from __future__ import annotations

import hmac
import secrets
from datetime import timedelta
from typing import Any

from authlib.oauth2.rfc6749 import InvalidGrantError
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from django.db import transaction
from django.utils import timezone

from poppy_django.authority import grants
from poppy_django.authority.models import AuthorizationCode, Client, Grant, Session

CODE_SECONDS = 60


class InvalidAuthorizationRequest(Exception):
    """A request that cannot be answered by redirecting (bad client or redirect URI)."""


def redirect_uri_of(client: Client, requested: Any) -> str:
    """The redirect URI, which must be one of the client's registered ones exactly."""
    registered = client.metadata.get("redirect_uris") or []
    if not isinstance(requested, str) or requested not in registered:
        raise InvalidAuthorizationRequest("The redirect URI is not registered for this client.")
    return requested


def issue_code(client: Client, redirect_uri: str, challenge: str, user: Any, scope: str) -> str:
    """A one-use authorization code for the logged-in ``user``'s approval (kept as a hash),
    bound to the account's state now (its password)."""
    code = secrets.token_urlsafe(32)
    record = AuthorizationCode(
        client=client,
        code_hash=grants.token_hash(code),
        redirect_uri=redirect_uri,
        code_challenge=challenge,
        account_id=grants.account_id_of(user),
        scope=scope,
        expires_at=timezone.now() + timedelta(seconds=CODE_SECONDS),
    )
    record.approve(user)
    record.save()
    return code


def exchange(
    client: Client, form: dict[str, str], session_id: str, jkt: str
) -> tuple[Session, str]:
    """The code for a signed-in Session and an Account Token (``invalid_grant`` otherwise)."""
    verifier = form.get("code_verifier", "")
    with transaction.atomic():
        record = (
            AuthorizationCode.objects.select_for_update()
            .filter(code_hash=grants.token_hash(form.get("code", "")), client=client)
            .first()
        )
        if (
            record is not None
            and record.used_at is None
            and record.expires_at > timezone.now()
            and record.redirect_uri == form.get("redirect_uri")
            and 43 <= len(verifier) <= 128
            and hmac.compare_digest(create_s256_code_challenge(verifier), record.code_challenge)
            and record.approval_stands()  # the account did not change since the approval
        ):
            session, account_token = grants.consented(
                client,
                session_id,
                account_id=record.account_id,
                scope=record.scope,
                method=Grant.Method.DIRECT,
                jkt=jkt,
                approval=record.approval,
            )
            record.used_at = timezone.now()
            record.grant = session.grant
            record.save(update_fields=["used_at", "grant"])
            return session, account_token
        if record is not None and record.used_at is not None and record.grant_id is not None:
            # Presented again: whoever holds it now, its sign-in is revoked (committed).
            grants.revoke_grants(Grant.objects.filter(pk=record.grant_id))
    raise InvalidGrantError("The authorization code is not valid.")
