"""When each source of gauges was last read is a process's own, as readiness is: two web
processes of the example project (its SDK on, sharing one multiprocess directory as on a
host), one whose broker URL names a port where nothing listens, the other reading the
broker (Redis). The one that cannot read collects last; the scrape still shows the other's
later read, under its own ``pid``, and ``max`` over the series (what PoppyRedisUnreachable
reads) is that read. With one series for every process the scrape showed whichever process
collected last: the stale time in some scrapes and not in others."""

from __future__ import annotations

import os

from tests.multiprocess.cluster import free_port
from tests.ops.one_host import Host

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


def test_each_process_reports_its_own_read_times(host: Host) -> None:
    redis = os.environ.get("POPPY_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    nowhere = f"redis://127.0.0.1:{free_port()}/0"
    cut_off = host.start("cut-off", READ_AND_COLLECT, REDIS_URL=redis, CELERY_BROKER_URL=nowhere)
    cut_off_pid, cut_off_read = cut_off.ask("collect")
    healthy = host.start("healthy", READ_AND_COLLECT, REDIS_URL=redis, CELERY_BROKER_URL=redis)
    healthy_pid, healthy_read = healthy.ask("collect")
    # Its reads fail: its time stands still. It collected last.
    assert cut_off.ask("collect") == [cut_off_pid, cut_off_read]
    assert float(cut_off_read) < float(healthy_read)  # the healthy one read after it started
    broker = {
        sample.labels.get("pid", ""): sample.value
        for sample in host.scrape(NAME)
        if sample.labels["source"] == "broker"
    }
    assert broker == {cut_off_pid: float(cut_off_read), healthy_pid: float(healthy_read)}, broker
    assert max(broker.values()) == float(healthy_read)
