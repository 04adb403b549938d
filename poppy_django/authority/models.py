"""What the authority remembers: personal-agent clients and the Sessions they started.

No credential is stored: a Session Token is a signed JWT nobody keeps, and a Session is
found by its non-secret ``session_id``.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


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


class Session(models.Model):
    """One Session of a personal agent for one pairwise User: signed out until a sign-in."""

    session_id = models.CharField(max_length=64, unique=True)
    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="sessions")
    #: The pairwise User id the personal agent chose (opaque; never a person's data).
    user_id = models.CharField(max_length=256)
    #: RFC 7638 thumbprint of the DPoP key the Session's tokens are bound to.
    jkt = models.CharField(max_length=64)
    account_id = models.CharField(max_length=256, null=True, blank=True)
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
        return self.account_id is not None

    @property
    def active(self) -> bool:
        return self.ended_at is None and self.client.status == Client.Status.ALLOWED
