"""``manage.py poppy_reap``: re-dispatch conversations whose turn worker died."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from poppy_django.engine.maintenance import reap


class Command(BaseCommand):
    help = "Re-dispatch conversations left working whose lease expired (safe to run anytime)."

    def handle(self, *args: Any, **options: Any) -> None:
        reaped = reap()
        for conversation_id in reaped:
            self.stdout.write(f"re-dispatched {conversation_id}")
        self.stdout.write(self.style.SUCCESS(f"{len(reaped)} conversation(s) re-dispatched"))
