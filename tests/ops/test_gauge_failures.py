"""The database's gauges when the database cannot answer them: the example project as shipped,
its SDK on, before its migrations have run. Each process reads them off the collection,
every interval (:mod:`poppy_django.observe.readings`); a failure is logged when it starts and
when the gauges read again, not at each read. A collection returns at once whatever the
reads do; a read stuck behind a lock gives up after its statement timeout."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.db import connection, transaction

from poppy_django.observe import metrics  # noqa: F401 (adds the database's source)
from poppy_django.observe.readings import reader
from tests.waiting import eventually

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


@pytest.mark.django_db(transaction=True)
def test_a_gauge_read_stuck_behind_a_lock_gives_up(caplog: pytest.LogCaptureFixture) -> None:
    """The database's gauges read with a statement timeout: a read that waits on a lock (a
    migration's, an operator's ``LOCK TABLE``) fails, says why, and frees its thread for the
    next read, instead of holding it until the lock is let go."""
    if connection.vendor != "postgresql":
        pytest.skip("statement_timeout is PostgreSQL's")
    source = reader.sources["database"]
    caplog.set_level(logging.WARNING, logger="poppy_django.observe")
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("LOCK TABLE poppy_django_conversation IN ACCESS EXCLUSIVE MODE")
        reading = threading.Thread(target=reader.read, args=(source,), daemon=True)
        reading.start()
        # Bounded: without the timeout the read waits for the lock, let go below.
        eventually(lambda: not reading.is_alive(), timeout=60, what="the read to give up")
    assert source.failing_since is not None
    assert "canceling statement due to statement timeout" in caplog.text, caplog.text
    reader.read(source)  # the lock gone: the gauges read again
    assert source.failing_since is None
