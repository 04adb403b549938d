"""Processes of the example project sharing one multiprocess directory, as on a host, for the
gauges that are each process's own (labelled with its ``pid``): a test starts processes that
each run a script of its own (the SDK writing Prometheus's multiprocess files, a SQLite
database of its own), makes one process's value differ and collect last, and scrapes the
directory as ``POPPY["METRICS_PATH"]`` does, while they are all alive (a dead process's
gauges leave the scrape). With one series for every process, the scrape would show whichever
process collected last."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import TracebackType

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from poppy_django.observe.prometheus import MultiprocessCollector

ROOT = Path(__file__).resolve().parents[2]


class Process:
    """One process of the host: it answers a line for each line it is sent (or once, by
    itself), and ends when its input closes."""

    def __init__(self, popen: subprocess.Popen[str]) -> None:
        self.popen = popen

    def said(self) -> list[str]:
        """The words of the process's next line."""
        assert self.popen.stdout is not None
        line = self.popen.stdout.readline()  # the process exits (and says nothing) if it failed
        assert line, f"the process ended: {self.popen.wait(timeout=60)}"
        return line.split()

    def ask(self, line: str) -> list[str]:
        """Send ``line``; the words of the answer."""
        assert self.popen.stdin is not None
        self.popen.stdin.write(f"{line}\n")
        self.popen.stdin.flush()
        return self.said()


class Host:
    """The processes a test started in ``tmp_path``, ended (their input closed) on exit."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.processes: list[Process] = []

    def start(self, name: str, script: str, **env: str) -> Process:
        """A process of the example project running ``script`` (``python -c``), with
        ``env`` on top of the host's: no Redis unless ``env`` names one, only the script's
        collections (the SDK's interval an hour)."""
        inherited = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("POPPY_", "DJANGO_")) and key != "REDIS_URL"
        }
        popen = subprocess.Popen(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env={
                **inherited,
                "DJANGO_SETTINGS_MODULE": "example_project.settings",
                "DATABASE_URL": f"sqlite:///{self.tmp_path / f'{name}.sqlite3'}",
                "POPPY_VAR_DIR": str(self.tmp_path / name),
                "OTEL_METRICS_EXPORTER": "prometheus_multiprocess",
                "OTEL_TRACES_EXPORTER": "none",
                "OTEL_METRIC_EXPORT_INTERVAL": "3600000",
                "PROMETHEUS_MULTIPROC_DIR": str(self.tmp_path / "metrics"),
                **env,
            },
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.processes.append(Process(popen))
        return self.processes[-1]

    def scrape(self, name: str) -> list[Sample]:
        """The samples of ``name`` a scrape of the host's processes shows now."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(MultiprocessCollector(self.tmp_path / "metrics"))
        scraped = generate_latest(registry).decode()
        return [
            sample
            for family in text_string_to_metric_families(scraped)
            for sample in family.samples
            if sample.name == name
        ]

    def __enter__(self) -> Host:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for process in self.processes:
            process.popen.communicate(timeout=60)
