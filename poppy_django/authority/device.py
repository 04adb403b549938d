"""Device Sign-In (RFC 8628; Poppy §4.4): a link and a code the User enters on our page.

The agent asks for codes (client-authenticated), shows the User the link, and polls the
token endpoint with the device code and the Session to sign in. The User logs in with the
project's own Django auth on :func:`poppy_django.authority.pages.device_page` and approves
some or all of the requested scopes (never more).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import timedelta
from typing import Any

from authlib.oauth2.rfc6749 import AccessDeniedError, InvalidGrantError, InvalidScopeError
from authlib.oauth2.rfc8628 import AuthorizationPendingError, ExpiredTokenError, SlowDownError
from django.core.cache import caches
from django.db import IntegrityError, transaction
from django.utils import timezone

from poppy_django.authority import grants
from poppy_django.authority.conf import authority_settings
from poppy_django.authority.metadata import scopes as offered_scopes
from poppy_django.authority.models import Client, DeviceAuthorization, Grant, Session

logger = logging.getLogger("poppy_django.authority")

#: Cache key prefix of the wrong user codes counted per user and per address.
GUESS_PREFIX = "poppy:authority:user-code-failures:"


def requested_scope(scope: str | None) -> str:
    """The requested scopes, each one offered; else ``invalid_scope``."""
    wanted = list(dict.fromkeys((scope or "").split()))
    offered = offered_scopes()
    if not wanted or any(name not in offered for name in wanted):
        raise InvalidScopeError("A requested scope is not offered by this company.")
    return " ".join(wanted)


def start(client: Client, scope: str | None) -> tuple[DeviceAuthorization, str]:
    """New codes for ``client``; the record and the device code (returned once)."""
    options = authority_settings()
    wanted = requested_scope(scope)
    device_code = secrets.token_urlsafe(32)
    for _ in range(5):
        try:
            with transaction.atomic():
                record = DeviceAuthorization.objects.create(
                    client=client,
                    device_code_hash=grants.token_hash(device_code),
                    user_code=new_user_code(),
                    scope=wanted,
                    expires_at=timezone.now() + timedelta(seconds=int(options.DEVICE_CODE_SECONDS)),
                    interval=int(options.DEVICE_INTERVAL_SECONDS),
                )
            return record, device_code
        except IntegrityError:  # a user code already in use: draw another
            continue
    raise RuntimeError("Could not draw a free user code.")


#: RFC 8628 section 6.1's advice: consonants only (no words spelt), case-insensitive entry.
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"


def new_user_code() -> str:
    """A user code to type on the device page: ``XXXX-XXXX`` (20^8, about 34 bits)."""
    letters = "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(8))
    return f"{letters[:4]}-{letters[4:]}"


def normalized_user_code(value: str) -> str:
    """What the User typed, as stored: upper case, the dash where we put it."""
    letters = "".join(ch for ch in value.upper() if ch.isalnum())
    return f"{letters[:4]}-{letters[4:]}" if len(letters) == 8 else letters


def pending(user_code: str) -> DeviceAuthorization | None:
    """The undecided, unexpired Device Sign-In with ``user_code``."""
    return (
        DeviceAuthorization.objects.select_related("client")
        .filter(
            user_code=normalized_user_code(user_code),
            account_id=None,
            denied=False,
            expires_at__gt=timezone.now(),
        )
        .first()
    )


class Guesser:
    """Who is typing user codes on the device page: their wrong codes, counted in the cache.

    A user code is short (RFC 8628 §5.1): it stays unguessable only while wrong tries are
    limited, per logged-in user and per client address, within a window. A wrong try is
    logged (who and how many; never the code: a near miss would give part of one away).
    """

    def __init__(self, user: str, address: str) -> None:
        options = authority_settings()
        self._window = int(options.DEVICE_CODE_FAILURE_WINDOW_SECONDS)
        self.user, self.address = user, address
        self._limits = {
            self._key("user", user): options.DEVICE_CODE_FAILURES_PER_USER,
            self._key("address", address): options.DEVICE_CODE_FAILURES_PER_ADDRESS,
        }

    @staticmethod
    def _key(kind: str, value: str) -> str:
        return f"{GUESS_PREFIX}{kind}:{hashlib.sha256(value.encode()).hexdigest()}"

    @staticmethod
    def _cache() -> Any:
        return caches[str(authority_settings().REPLAY_CACHE)]

    def over_limit(self) -> bool:
        """Whether this user or address has used up its wrong codes for the window."""
        counts = self._cache().get_many(list(self._limits))
        return any(
            limit is not None and int(counts.get(key, 0)) >= int(limit)
            for key, limit in self._limits.items()
        )

    def wrong_code(self) -> None:
        """Count (and log) one wrong or expired code."""
        cache, counts = self._cache(), []
        for key in self._limits:
            cache.add(key, 0, timeout=self._window)
            try:
                counts.append(int(cache.incr(key)))
            except ValueError:  # expired between add and incr
                cache.add(key, 1, timeout=self._window)
                counts.append(1)
        logger.warning(
            "Device Sign-In: a wrong user code from user %s at %s (%d by the user, %d from "
            "the address in the last %d s)",
            self.user,
            self.address or "an unknown address",
            counts[0],
            counts[1],
            self._window,
        )


def decide(record: DeviceAuthorization, user: Any, approved: list[str]) -> None:
    """The User's decision: approved by the logged-in ``user`` with the ``approved`` scopes,
    or None to deny. The approval is bound to the account's state now (its password)."""
    requested = record.scope.split()
    chosen = [scope for scope in requested if scope in approved]
    if user is None or not chosen:
        record.denied = True
        record.save(update_fields=["denied"])
        return
    record.account_id = grants.account_id_of(user)
    record.granted_scope = " ".join(chosen)
    record.approve(user)
    record.save(update_fields=["account_id", "granted_scope", "approved_by", "account_state"])


#: What an agent polling a voided approval is told (``access_denied``).
VOIDED = (
    "The approval no longer stands: the account changed since (a new password, or the user "
    "deactivated). Start a new sign-in."
)


def exchange(client: Client, device_code: str, session_id: str, jkt: str) -> tuple[Session, str]:
    """The token request of a polling agent: signed-in Session and Account Token, or why not.

    An approval whose account changed since (:meth:`~poppy_django.authority.models.
    ApprovedBy.approval_stands`) is voided (committed) and refused ``access_denied``."""
    now = timezone.now()
    with transaction.atomic():
        record = (
            DeviceAuthorization.objects.select_for_update()
            .filter(device_code_hash=grants.token_hash(device_code), client=client)
            .first()
        )
        if record is None or record.used_at is not None:
            raise InvalidGrantError("The device code is not valid.")
        if record.expires_at <= now:
            raise ExpiredTokenError("The device code has expired.")
        if record.denied:
            raise AccessDeniedError("The User refused the sign-in, or its approval was voided.")
        voided = record.account_id is not None and not record.approval_stands()
        if voided:
            record.denied = True
            record.save(update_fields=["denied"])
        elif record.account_id is not None:
            signed_in = grants.consented(
                client,
                session_id,
                account_id=record.account_id,
                scope=record.granted_scope,
                method=Grant.Method.DEVICE,
                jkt=jkt,
                approval=record.approval,
            )
            record.used_at = now
            record.save(update_fields=["used_at"])
            return signed_in
        else:
            # Still pending: remember the poll (committed), then tell the agent to wait. A
            # second of slack: the agent's clock and ours tick apart.
            too_soon = (
                record.last_polled_at is not None
                and (now - record.last_polled_at).total_seconds() < record.interval - 1
            )
            record.last_polled_at = now
            record.save(update_fields=["last_polled_at"])
    if voided:
        raise AccessDeniedError(VOIDED)
    raise SlowDownError() if too_soon else AuthorizationPendingError()
