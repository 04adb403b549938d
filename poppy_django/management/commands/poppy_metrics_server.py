"""``manage.py poppy_metrics_server``: this host's metrics over HTTP, for a host with no web
process (Celery workers): what ``POPPY["METRICS_PATH"]`` serves on a web host."""

from __future__ import annotations

import signal
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from prometheus_client import CollectorRegistry, start_http_server

from poppy_django.observe.prometheus import MultiprocessCollector


class Command(BaseCommand):
    help = "Serve the metrics the host's processes write to PROMETHEUS_MULTIPROC_DIR."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=9464)
        parser.add_argument("--address", default="0.0.0.0")  # noqa: S104 - a scrape target

    def handle(self, *args: Any, **options: Any) -> None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(MultiprocessCollector())
        start_http_server(options["port"], addr=options["address"], registry=registry)
        self.stdout.write(f"serving metrics on {options['address']}:{options['port']}/metrics")
        while True:
            signal.pause()
