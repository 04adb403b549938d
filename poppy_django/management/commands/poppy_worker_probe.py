"""``manage.py poppy_worker_probe``: an exec health check for a host running turn engines."""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from poppy_django.conf import poppy_settings
from poppy_django.observe import heartbeats


class Command(BaseCommand):
    #: A probe says whether the engine beats, fast: the project's system checks are not its
    #: business (a check failing on a worker host would make every probe fail).
    requires_system_checks: list[str] = []
    help = (
        "Exit 0 if a live turn engine on this host (a Celery worker process) has heartbeated "
        "within the bound, else exit 1 saying what it found: a container's exec probe."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--within",
            type=float,
            default=None,
            help="seconds since the latest heartbeat (default: POPPY['LEASE_SECONDS'])",
        )

    def run_from_argv(self, argv: list[str]) -> None:
        """Answer, then end the process at once: its exit code is the probe's answer, and
        nothing after it may hold it (the OpenTelemetry SDK's shutdown collects and exports
        once more at exit; an exporter waiting on an unreachable collector would make a
        healthy worker's probe time out and the worker be restarted)."""
        code = 0
        try:
            super().run_from_argv(argv)
        except SystemExit as exit_:  # a CommandError: its message already written
            code = exit_.code if isinstance(exit_.code, int) else 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)

    def handle(self, *args: Any, **options: Any) -> None:
        within = options["within"] or poppy_settings.LEASE_SECONDS
        ok, words = heartbeats.healthy(within)
        if not ok:
            raise CommandError(words)
        self.stdout.write(words)
