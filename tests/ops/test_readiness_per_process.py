"""Readiness is a process's own, and so is its gauge: two web processes of the example project
(its SDK on, sharing one multiprocess directory as on a host), one of them not ready (its
database unmigrated), the other ready and collecting after it. The scrape shows each
process's checks under its own ``pid``: the failing one is not hidden by the healthy one's
later collection (which ``PoppyNotReady`` would then miss), nor the reverse."""

from __future__ import annotations

from tests.ops.one_host import Host

#: A web process: migrated or not, it answers one probe, collects, says the probe's status
#: and its pid, and stays alive (a dead process's gauges leave the scrape) until the test
#: closes its input.
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


def test_each_process_reports_its_own_readiness(host: Host) -> None:
    failing_status, failing = host.start("unmigrated", PROBE_AND_STAY, MIGRATE="0").said()
    ready_status, ready = host.start("ready", PROBE_AND_STAY, MIGRATE="1").said()  # collects later
    assert failing_status == "503" and ready_status == "200"
    readiness = {
        (sample.labels["pid"], sample.labels["check"]): sample.value
        for sample in host.scrape("poppy_readiness_failing")
    }
    assert readiness[(failing, "migrations")] == 1, readiness
    assert readiness[(ready, "migrations")] == 0, readiness
    assert readiness[(failing, "database")] == readiness[(ready, "database")] == 0
