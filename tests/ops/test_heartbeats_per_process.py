"""Each turn engine's heartbeat is its process's own, as readiness and the gauges' read times
are: two worker processes of the example project (a prefork worker's children, sharing one
multiprocess directory as on a host), one whose engine beat once and no more (its heartbeat
thread standing in a statement on a hung database), the other beating. The stale one collects
last; the scrape still shows the other's later beat, under its own ``pid``, and ``max`` over
the series (what PoppyNoWorkerHeartbeat and the dashboard read) is that beat. With one series
for every process the scrape showed whichever process collected last: the stale beat in some
scrapes and not in others."""

from __future__ import annotations

from tests.ops.one_host import Host

NAME = "poppy_engine_heartbeat_time_seconds"
#: A worker process: at each line of its input it beats as its engine's heartbeat thread does
#: (``beat``) or not (``collect``), collects, then says its pid and the heartbeat it exported
#: (its own file, what a scrape adds up); it ends with its input.
BEAT_AND_COLLECT = """
import json, os, sys
from pathlib import Path
import django
django.setup()
from opentelemetry import metrics
from poppy_django.observe import heartbeats
provider = metrics.get_meter_provider()
for line in sys.stdin:
    if line.strip() == "beat":
        heartbeats.beat()
    provider.force_flush()
    written = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"], f"poppy-{os.getpid()}.json")
    (metric,) = [m for m in json.loads(written.read_text())["metrics"]
                 if m["name"] == "poppy.engine.heartbeat_time"]
    (point,) = metric["points"]
    print(os.getpid(), point["value"], flush=True)
"""


def test_each_engine_reports_its_own_heartbeat(host: Host) -> None:
    stale = host.start("stale", BEAT_AND_COLLECT)
    stale_pid, stale_beat = stale.ask("beat")
    fresh = host.start("fresh", BEAT_AND_COLLECT)
    fresh_pid, fresh_beat = fresh.ask("beat")
    assert stale.ask("collect") == [stale_pid, stale_beat]  # beats no more; collects last
    assert float(stale_beat) < float(fresh_beat)
    beats = {sample.labels.get("pid", ""): sample.value for sample in host.scrape(NAME)}
    assert beats == {stale_pid: float(stale_beat), fresh_pid: float(fresh_beat)}, beats
    assert max(beats.values()) == float(fresh_beat)
