"""Readiness is a process's own, and so is its gauge: two web processes of the example project
(its SDK on, sharing one multiprocess directory as on a host), one of them not ready (its
database unmigrated), the other ready and collecting after it. The scrape shows each
process's checks under its own ``pid``: the failing one is not hidden by the healthy one's
later collection (which ``PoppyNotReady`` would then miss), nor the reverse."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from poppy_django.observe.prometheus import MultiprocessCollector

ROOT = Path(__file__).resolve().parents[2]
#: A web process: migrated or not, it answers one probe, collects, and stays alive (a dead
#: process's gauges leave the scrape) until the test closes its input.
PROBE_AND_STAY = """
import os, sys
import django
django.setup()
from django.core.management import call_command
from django.test import Client
from opentelemetry import metrics
if os.environ["MIGRATE"] == "1":
    call_command("migrate", verbosity=0)
answer = Client().get("/health/ready")
metrics.get_meter_provider().force_flush()
print(answer.status_code, os.getpid(), flush=True)
sys.stdin.read()
"""


def _web_process(tmp_path: Path, name: str, *, migrated: bool) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("POPPY_", "DJANGO_"))}
    clean.pop("REDIS_URL", None)
    return subprocess.Popen(
        [sys.executable, "-c", PROBE_AND_STAY],
        cwd=ROOT,
        env={
            **clean,
            "DJANGO_SETTINGS_MODULE": "example_project.settings",
            "DATABASE_URL": f"sqlite:///{tmp_path / f'{name}.sqlite3'}",
            "POPPY_VAR_DIR": str(tmp_path / name),
            "MIGRATE": "1" if migrated else "0",
            "OTEL_METRICS_EXPORTER": "prometheus_multiprocess",
            "OTEL_METRIC_EXPORT_INTERVAL": "3600000",  # only the script's collection
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
        },
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _probed(process: subprocess.Popen[str]) -> tuple[int, str]:
    assert process.stdout is not None
    line = process.stdout.readline()  # the process exits (and says nothing) if it failed
    assert line, f"the web process ended: {process.wait(timeout=60)}"
    status, pid = line.split()
    return int(status), pid


def test_each_process_reports_its_own_readiness(tmp_path: Path) -> None:
    started: list[subprocess.Popen[str]] = []
    try:
        started.append(_web_process(tmp_path, "unmigrated", migrated=False))
        failing = _probed(started[-1])
        started.append(_web_process(tmp_path, "ready", migrated=True))  # collects later
        ready = _probed(started[-1])
        registry = CollectorRegistry(auto_describe=False)
        registry.register(MultiprocessCollector(tmp_path / "metrics"))
        scraped = generate_latest(registry).decode()
    finally:
        for process in started:
            process.communicate(timeout=60)
    assert failing[0] == 503 and ready[0] == 200
    readiness = {
        (sample.labels["pid"], sample.labels["check"]): sample.value
        for family in text_string_to_metric_families(scraped)
        for sample in family.samples
        if sample.name == "poppy_readiness_failing"
    }
    assert readiness[(failing[1], "migrations")] == 1, readiness
    assert readiness[(ready[1], "migrations")] == 0, readiness
    assert readiness[(failing[1], "database")] == readiness[(ready[1], "database")] == 0
