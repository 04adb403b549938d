"""What the authority remembers: clients, Sessions, sign-ins (grants) and Account Tokens.

No credential is stored in the clear: a Session Token is a signed JWT nobody keeps, a
Session is found by its non-secret ``session_id``, and Account Tokens and device codes are
kept as SHA-256 hashes only.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from poppy_django.authority.account_state import Approval, stands, state_of


class ApprovedBy(models.Model):
    """Who approved a sign-in, and the account's state then
    (:mod:`poppy_django.authority.account_state`): the approval stands only while that user
    exists, is active and keeps the password it had."""

    #: The Django user who approved it (None: unbound, or that user was deleted since).
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    #: ``account_state.state_of(approved_by)`` at the approval; "" for an unbound one.
    account_state = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        abstract = True

    def approve(self, user: Any) -> None:
        """Record ``user`` (None: unbound) as the approver, with the account's state now."""
        self.approved_by = user
        self.account_state = state_of(user)

    def rebind(self) -> bool:
        """Bind a standing approval to the state under the current ``SECRET_KEY`` (it may
        have stood by a fallback key): whether that changed it. As Django's ``get_user``
        updates a session's hash, so that retiring the old key later keeps the sign-in."""
        if not self.account_state or self.approved_by is None:
            return False
        current = state_of(self.approved_by)
        changed = current != self.account_state
        self.account_state = current
        return changed

    @property
    def approval(self) -> Approval:
        """What a grant made from this approval keeps of it."""
        return Approval(self.approved_by_id, self.account_state)

    def approval_stands(self) -> bool:
        """Whether the approval still signs in (:func:`~poppy_django.authority.account_state.
        stands`): no query for an unbound one."""
        if not self.account_state:
            return True
        return stands(self.approved_by, self.account_state)


class Client(models.Model):
    """A personal agent, known by its HTTPS ``client_id`` URL and the metadata served there."""

    class Status(models.TextChoices):
        ALLOWED = "allowed", "allowed"
        BLOCKED = "blocked", "blocked"

    client_id = models.URLField(max_length=512, unique=True)
    name = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ALLOWED)
    #: Pre-registered by staff: may start Sessions when POPPY_AUTHORITY["CLIENTS"] is
    #: "registered".
    registered = models.BooleanField(default=False)
    #: The client metadata document and its JWKS as last fetched (public data only).
    metadata = models.JSONField(default=dict, blank=True)
    jwks = models.JSONField(default=dict, blank=True)
    fetched_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["client_id"]

    def __str__(self) -> str:
        return self.name or self.client_id


class Grant(ApprovedBy):
    """A sign-in: the User of ``account_id`` let a client act with ``scope``.

    Its Account Tokens sign Sessions in; revoking it (sign-out, "disconnect this agent")
    signs out every Session signed in from it.
    """

    class Method(models.TextChoices):
        DEVICE = "device", "device"
        DIRECT = "direct", "direct"
        MEDIATED = "mediated", "mediated"

    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="grants")
    user_id = models.CharField(max_length=256)
    account_id = models.CharField(max_length=256)
    scope = models.CharField(max_length=1000, blank=True)
    method = models.CharField(max_length=16, choices=Method.choices)
    created_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["account_id", "client"])]

    def __str__(self) -> str:
        return f"{self.account_id} → {self.client}"


class AccountToken(models.Model):
    """One Account Token of a grant, by hash; rotation replaces it with a new one."""

    grant = models.ForeignKey(Grant, on_delete=models.CASCADE, related_name="tokens")
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    #: Set when a refresh rotated it: using it again is ``invalid_grant``.
    rotated_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"Account Token {self.pk} of {self.grant}"


class DeviceAuthorization(ApprovedBy):
    """A Device Sign-In (RFC 8628) from its codes to the User's decision on our page."""

    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="+")
    device_code_hash = models.CharField(max_length=64, unique=True)
    user_code = models.CharField(max_length=16, unique=True)
    scope = models.CharField(max_length=1000)
    expires_at = models.DateTimeField()
    interval = models.PositiveIntegerField()
    last_polled_at = models.DateTimeField(null=True, blank=True)
    #: The User's decision: the account and the scopes approved, or ``denied``.
    account_id = models.CharField(max_length=256, null=True, blank=True)
    granted_scope = models.CharField(max_length=1000, blank=True)
    denied = models.BooleanField(default=False)
    #: Exchanged for tokens once; a second exchange is ``invalid_grant``.
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.user_code


class AuthorizationCode(ApprovedBy):
    """Direct Sign-In (authorization code + PKCE): the User's approval, exchanged once."""

    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="+")
    code_hash = models.CharField(max_length=64, unique=True)
    redirect_uri = models.URLField(max_length=1000)
    code_challenge = models.CharField(max_length=128)
    account_id = models.CharField(max_length=256)
    scope = models.CharField(max_length=1000)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    #: The sign-in its exchange made: revoked if the code is presented again.
    grant = models.ForeignKey(
        "Grant", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self) -> str:
        return f"code for {self.account_id}"


class Session(models.Model):
    """One Session of a personal agent for one pairwise User: signed out until a sign-in."""

    session_id = models.CharField(max_length=64, unique=True)
    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="sessions")
    #: The pairwise User id the personal agent chose (opaque; never a person's data).
    user_id = models.CharField(max_length=256)
    #: RFC 7638 thumbprint of the DPoP key the Session's tokens are bound to.
    jkt = models.CharField(max_length=64)
    #: The account the Session was first signed in to: it is never signed in to another.
    account_id = models.CharField(max_length=256, null=True, blank=True)
    #: The sign-in it is signed in from; None while signed out.
    grant = models.ForeignKey(
        Grant, null=True, blank=True, on_delete=models.SET_NULL, related_name="sessions"
    )
    scope = models.CharField(max_length=1000, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    renewed_at = models.DateTimeField(default=timezone.now)
    #: Set when the Session is signed out or ended: its tokens stop at the next request.
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["client", "user_id"])]

    def __str__(self) -> str:
        return self.session_id

    @property
    def signed_in(self) -> bool:
        return self.grant_id is not None

    @property
    def active(self) -> bool:
        return self.ended_at is None and self.client.status == Client.Status.ALLOWED


class MediatedSignIn(ApprovedBy):
    """A Mediated Sign-In waiting for its one-time code (``code_required``).

    Only the Session that started it may finish it; the code is kept as a SHA-256 hash, and
    no credential of the first step is kept at all.
    """

    class Status(models.TextChoices):
        CODE_REQUIRED = "code_required", "code required"
        COMPLETE = "complete", "complete"
        FAILED = "failed", "failed"
        EXPIRED = "expired", "expired"

    sign_in_id = models.CharField(max_length=64, unique=True)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    account_id = models.CharField(max_length=256)
    scope = models.CharField(max_length=1000)
    code_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.CODE_REQUIRED)
    attempts = models.PositiveIntegerField(default=0)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.sign_in_id


class RevokedSession(models.Model):
    """A development-mode session ended by ``poppy_token --revoke`` (see docs/security.md).

    In the database so that every process sees a revocation; only ids, never a token. The
    table keeps the name it had while the core owned the model (migration
    ``poppy_django.0012_revokedsession_moved_to_the_authority``), so no row moves.
    """

    session_id = models.CharField(max_length=512, unique=True)
    revoked_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "poppy_django_revokedsession"

    def __str__(self) -> str:
        return self.session_id
