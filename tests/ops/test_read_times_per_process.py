"""When each source of gauges was last read is a process's own, as readiness is: two web
processes of the example project (its SDK on, sharing one multiprocess directory as on a
host), one whose broker URL names a port where nothing listens, the other reading the
broker (Redis). The one that cannot read collects last; the scrape still shows the other's
later read, under its own ``pid``, and ``max`` over the series (what PoppyRedisUnreachable
reads) is that read. With one series for every process the scrape showed whichever process
collected last: the stale time in some scrapes and not in others."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from poppy_django.observe.prometheus import MultiprocessCollector
from tests.multiprocess.cluster import free_port

ROOT = Path(__file__).resolve().parents[2]
NAME = "poppy_gauges_read_time_seconds"
#: A web process: at each line of its input, it reads its sources now (instead of waiting for
#: its reading thread's interval) and collects, then says its pid and the broker's read time
#: it exported (its own file, what a scrape adds up); it ends with its input.
READ_AND_COLLECT = """
import json, os, sys
from pathlib import Path
import django
django.setup()
from opentelemetry import metrics
from poppy_django.observe import readings
provider = metrics.get_meter_provider()
provider.force_flush()  # the first collection starts the reading threads
for _ in sys.stdin:
    readings.reader.read_all()
    provider.force_flush()
    written = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"], f"poppy-{os.getpid()}.json")
    (metric,) = [m for m in json.loads(written.read_text())["metrics"]
                 if m["name"] == "poppy.gauges.read_time"]
    (broker,) = [p["value"] for p in metric["points"] if p["labels"]["source"] == "broker"]
    print(os.getpid(), broker, flush=True)
"""


def _web_process(tmp_path: Path, name: str, broker: str) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("POPPY_", "DJANGO_"))}
    redis = os.environ.get("POPPY_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    return subprocess.Popen(
        [sys.executable, "-c", READ_AND_COLLECT],
        cwd=ROOT,
        env={
            **clean,
            "DJANGO_SETTINGS_MODULE": "example_project.settings",
            "DATABASE_URL": f"sqlite:///{tmp_path / f'{name}.sqlite3'}",
            "POPPY_VAR_DIR": str(tmp_path / name),
            "REDIS_URL": redis,
            "CELERY_BROKER_URL": broker,
            "OTEL_METRICS_EXPORTER": "prometheus_multiprocess",
            "OTEL_TRACES_EXPORTER": "none",
            "OTEL_METRIC_EXPORT_INTERVAL": "3600000",  # only the script's collections
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
        },
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _collected(process: subprocess.Popen[str]) -> tuple[str, float]:
    """One read and collection: the process's pid and the broker's read time it exported."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("collect\n")
    process.stdin.flush()
    line = process.stdout.readline()  # the process exits (and says nothing) if it failed
    assert line, f"the web process ended: {process.wait(timeout=60)}"
    pid, read_at = line.split()
    return pid, float(read_at)


def test_each_process_reports_its_own_read_times(tmp_path: Path) -> None:
    redis = os.environ.get("POPPY_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    started: list[subprocess.Popen[str]] = []
    try:
        started.append(_web_process(tmp_path, "cut-off", f"redis://127.0.0.1:{free_port()}/0"))
        cut_off = _collected(started[-1])
        started.append(_web_process(tmp_path, "healthy", redis))
        healthy = _collected(started[-1])
        assert _collected(started[0]) == cut_off  # its reads fail: its time stands still
        registry = CollectorRegistry(auto_describe=False)  # the cut-off one collected last
        registry.register(MultiprocessCollector(tmp_path / "metrics"))
        scraped = generate_latest(registry).decode()
    finally:
        for process in started:
            process.communicate(timeout=60)
    assert cut_off[1] < healthy[1]  # the healthy process read after the other started
    broker = {
        sample.labels.get("pid", ""): sample.value
        for family in text_string_to_metric_families(scraped)
        for sample in family.samples
        if sample.name == NAME and sample.labels["source"] == "broker"
    }
    assert broker == {cut_off[0]: cut_off[1], healthy[0]: healthy[1]}, broker
    assert max(broker.values()) == healthy[1]
