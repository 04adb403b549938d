from __future__ import annotations

from django.db import models


class Order(models.Model):
    """An order of one account; ``A-1`` style ids."""

    class Status(models.TextChoices):
        PROCESSING = "processing"
        SHIPPED = "shipped"
        CANCELLED = "cancelled"

    id = models.CharField(primary_key=True, max_length=32)
    account_id = models.CharField(max_length=64, db_index=True)
    item = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=Status.choices)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"
