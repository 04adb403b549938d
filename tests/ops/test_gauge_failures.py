"""The database's gauges when the database cannot answer them: the example project as shipped,
its SDK on, before its migrations have run. Each process reads them off the collection,
every interval (:mod:`poppy_django.observe.readings`); a failure is logged when it starts and
when the gauges read again, not at each read. A collection returns at once whatever the
reads do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COLLECT_UNMIGRATED_THEN_MIGRATED = """
import django
django.setup()
from django.core.management import call_command
from opentelemetry import metrics
from poppy_django.observe.readings import reader

provider = metrics.get_meter_provider()
provider.force_flush()  # collects (the reading thread starts, its interval an hour)
for _ in range(3):
    reader.read_all()
call_command("migrate", verbosity=0)
reader.read_all()
print("read again", flush=True)
# Then one of the reads fails (a column gone) while the others would pass: one streak.
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("ALTER TABLE poppy_django_conversation DROP COLUMN handoff_requested_at")
for _ in range(3):
    reader.read_all()
    provider.force_flush()
print("collected")
"""
FAILED = "could not read the database's gauges"
READ_AGAIN = "the database's gauges read again"


def test_a_failing_database_is_logged_once_a_streak(tmp_path: Path) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("POPPY_", "DJANGO_"))}
    result = subprocess.run(
        [sys.executable, "-c", COLLECT_UNMIGRATED_THEN_MIGRATED],
        cwd=ROOT,
        env={
            **clean,
            "DJANGO_SETTINGS_MODULE": "example_project.settings",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'unmigrated.sqlite3'}",
            "OTEL_METRICS_EXPORTER": "prometheus_multiprocess",
            "OTEL_METRIC_EXPORT_INTERVAL": "3600000",  # only the script's reads
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert result.stdout.strip().endswith("collected")
    logged = result.stderr
    # Three reads failed: one warning, with its cause; then one line when they read again;
    # then three failing reads again: one warning.
    assert logged.count(FAILED) == 2, logged
    assert logged.count(READ_AGAIN) == 1, logged
    first, read_again, second = (
        logged.index(FAILED),
        logged.index(READ_AGAIN),
        logged.rindex(FAILED),
    )
    assert first < read_again < second
    assert "no such table" in logged[first:read_again]
    assert "handoff_requested_at" in logged[second:]
