"""``manage.py poppy_prune_events --older-than 30d``: delete events past retention."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from poppy_django.engine.maintenance import PruneReport, parse_duration, prune_events


class Command(BaseCommand):
    help = (
        "Delete events older than a duration, in small batches; cursors into pruned events "
        "then answer 410 cursor_expired. Unanswered user messages are kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than", required=True, help="e.g. 30d, 2h, 15m, 0s")
        parser.add_argument("--batch-size", type=int, default=1000)
        parser.add_argument("--dry-run", action="store_true", help="count, delete nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            older_than = parse_duration(options["older_than"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        verb = "would delete" if options["dry_run"] else "deleted"

        def progress(report: PruneReport) -> None:
            if options["verbosity"] >= 2:
                self.stdout.write(f"{report.conversations} conversation(s), {verb} {report.events}")

        report = prune_events(
            older_than,
            batch_size=options["batch_size"],
            dry_run=options["dry_run"],
            progress=progress,
        )
        self.stdout.write(
            self.style.SUCCESS(
                f"{verb} {report.events} event(s) in {report.conversations} conversation(s)"
            )
        )
