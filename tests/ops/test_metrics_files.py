"""The multiprocess Prometheus path adds the processes' files up as Prometheus would want:
counters and histograms of every process (a dead worker's turns happened), up-down counters
of live processes only, gauges from the process that collected last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from poppy_django.observe.prometheus import MultiprocessCollector


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _snapshot(folder: Path, pid: int, written: float, metrics: list[dict[str, Any]]) -> None:
    (folder / f"poppy-{pid}.json").write_text(
        json.dumps({"pid": pid, "written": written, "metrics": metrics})
    )


def _metric(name: str, kind: str, points: list[dict[str, Any]], unit: str = "") -> dict[str, Any]:
    return {"name": name, "unit": unit, "description": name, "kind": kind, "points": points}


def _samples(folder: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MultiprocessCollector(folder))
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_the_files_of_live_and_dead_processes_add_up(tmp_path: Path) -> None:
    alive, dead = os.getpid(), _dead_pid()
    histogram = {"bounds": [0.1, 1.0], "counts": [1, 2, 0], "sum": 1.5, "count": 3}
    for pid, written, in_flight, idle in ((alive, 200.0, 2, 5), (dead, 100.0, 3, 9)):
        _snapshot(
            tmp_path,
            pid,
            written,
            [
                _metric(
                    "poppy.turns", "counter", [{"labels": {"outcome": "answered"}, "value": 4}]
                ),
                _metric("poppy.turns.in_flight", "updown", [{"labels": {}, "value": in_flight}]),
                _metric(
                    "poppy.conversations", "gauge", [{"labels": {"status": "idle"}, "value": idle}]
                ),
                _metric("poppy.turn.duration", "histogram", [{"labels": {}, **histogram}], "s"),
            ],
        )
    (tmp_path / "poppy-torn.json").write_text("{not json")  # being replaced: skipped

    samples = _samples(tmp_path)
    assert samples[("poppy_turns_total", (("outcome", "answered"),))] == 8  # both processes
    assert samples[("poppy_turns_in_flight", ())] == 2  # the dead one runs nothing
    assert samples[("poppy_conversations", (("status", "idle"),))] == 5  # the live one's
    assert samples[("poppy_turn_duration_seconds_count", ())] == 6
    assert samples[("poppy_turn_duration_seconds_sum", ())] == 3.0
    assert samples[("poppy_turn_duration_seconds_bucket", (("le", "0.1"),))] == 2
    assert samples[("poppy_turn_duration_seconds_bucket", (("le", "1.0"),))] == 6
    assert samples[("poppy_turn_duration_seconds_bucket", (("le", "+Inf"),))] == 6


def test_of_two_live_processes_the_later_collection_gives_the_gauge(tmp_path: Path) -> None:
    parent = os.getppid()  # alive as long as this test runs
    for pid, written, working in ((os.getpid(), 100.0, 7), (parent, 300.0, 0)):
        gauge = [{"labels": {"status": "working"}, "value": working}]
        _snapshot(tmp_path, pid, written, [_metric("poppy.conversations", "gauge", gauge)])
    assert _samples(tmp_path)[("poppy_conversations", (("status", "working"),))] == 0
