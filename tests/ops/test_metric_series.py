"""The series the alerts rely on, from the example project as shipped with its SDK on (in a
process of its own: the SDK is global): the counters' outcomes exist at zero before anything
happened, so ``rate()`` sees the first failure; every route's requests are measured (the
endpoint, the probes, the metrics, the desk, the authority's documents) by URL pattern and
status class; a client hanging up a long-poll is recorded as 499, not as a 500 of the
server's; a method the client made up is ``_OTHER``; the readiness probe's checks are gauges
that need no database to be read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import asyncio
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from asgiref.testing import ApplicationCommunicator
from opentelemetry import metrics
from example_project.asgi import application
from poppy_django.verifier.fake import fake_authorization

HEADERS = [
    (b"host", b"testserver"),
    (b"authorization", fake_authorization().encode()),
    (b"content-type", b"application/json"),
]


def scope(method, path, query=b"", body=b""):
    headers = [*HEADERS, (b"content-length", str(len(body)).encode())]
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": query,
        "headers": headers, "client": ("127.0.0.1", 1), "server": ("testserver", 80),
    }


async def answer(method, path, body=b"", query=b""):
    talk = ApplicationCommunicator(application, scope(method, path, query, body))
    await talk.send_input({"type": "http.request", "body": body})
    start = await talk.receive_output(timeout=60)
    content = b""
    while True:
        part = await talk.receive_output(timeout=60)
        content += part.get("body", b"")
        if not part.get("more_body"):
            return start["status"], content


async def main():
    metrics.get_meter_provider().force_flush()  # before anything: the series at zero
    status, _ = await answer("BREW", "/poppy/conversations")
    print("BREW", status)
    message = b'{"message": {"id": "m-1", "sender": "agent", "text": "hello"}}'
    status, body = await answer("POST", "/poppy/conversations", message)
    assert status == 201, body
    conversation = __import__("json").loads(body)["conversation_id"]
    status, _ = await answer("GET", "/health/ready")
    print("ready", status)
    # Every other route is measured too: the probes, the metrics, the desk (a redirect to the
    # login page), the authority's documents, a path nothing matches, a method made up.
    for method, path in [
        ("GET", "/health/live"),
        ("GET", "/metrics"),
        ("GET", "/admin/poppy_django/conversation/desk/"),
        ("GET", "/.well-known/poppy.json"),
        ("GET", "/no/such/page"),
        ("BREW", "/health/live"),
    ]:
        status, _ = await answer(method, path)
        print(method, path, status)
    # Read to the end of the turn, then long-poll for more: its client goes while it waits.
    path = f"/poppy/conversations/{conversation}/events"
    cursor, last = "", {}
    while last.get("status") != "idle":
        query = f"wait=5&cursor={cursor}" if cursor else "wait=5"
        status, body = await answer("GET", path, query=query.encode())
        page = __import__("json").loads(body)
        cursor, last = page["cursor"], (page["events"] or [last])[-1]
    query = f"wait=25&cursor={cursor}".encode()
    talk = ApplicationCommunicator(application, scope("GET", path, query))
    await talk.send_input({"type": "http.request", "body": b""})
    assert await talk.receive_nothing(timeout=2), "the long-poll answered at once"
    await talk.send_input({"type": "http.disconnect"})
    await talk.wait(timeout=30)
    metrics.get_meter_provider().force_flush()
    print("done")


asyncio.run(main())
"""


def _points(folder: Path, name: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for path in folder.glob("poppy-*.json"):
        for metric in json.loads(path.read_text())["metrics"]:
            if metric["name"] == name:
                found += metric["points"]
    return found


def test_series_the_alerts_read(tmp_path: Path) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("POPPY_", "DJANGO_"))}
    folder = tmp_path / "metrics"
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env={
            **clean,
            "DJANGO_SETTINGS_MODULE": "example_project.settings",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'example.sqlite3'}",
            "POPPY_AUTHENTICATE": "poppy_django.verifier.fake.verify",
            "POPPY_VAR_DIR": str(tmp_path),
            "OTEL_METRICS_EXPORTER": "prometheus_multiprocess",
            "OTEL_METRIC_EXPORT_INTERVAL": "3600000",  # only the script's collections
            "PROMETHEUS_MULTIPROC_DIR": str(folder),
        },
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("done"), result.stdout

    turns = {point["labels"]["outcome"]: point["value"] for point in _points(folder, "poppy.turns")}
    assert {"failed", "gave_up", "timed_out", "lease_lost"} <= set(turns)
    assert turns["failed"] == 0
    handoffs = {point["labels"]["outcome"] for point in _points(folder, "poppy.handoffs")}
    assert handoffs == {"queued", "joined", "unavailable", "timed_out"}
    assert [point["value"] for point in _points(folder, "poppy.dispatch.failures")] == [0]

    requests = [point["labels"] for point in _points(folder, "poppy.request.duration")]
    events = "/poppy/conversations/{conversation_id}/events"
    assert {"route": events, "method": "GET", "status": "499"} in requests
    assert not [labels for labels in requests if labels["status"] == "5xx"], requests
    assert {labels["method"] for labels in requests} == {"GET", "POST", "_OTHER"}
    # Every route, by its URL pattern, and the status by its class.
    for labels in [
        {"route": "/health/ready", "method": "GET", "status": "2xx"},
        {"route": "/health/live", "method": "GET", "status": "2xx"},
        {"route": "/health/live", "method": "_OTHER", "status": "4xx"},
        {"route": "/metrics", "method": "GET", "status": "2xx"},
        {"route": "/admin/poppy_django/conversation/desk/", "method": "GET", "status": "3xx"},
        {"route": "/.well-known/poppy.json", "method": "GET", "status": "2xx"},
        {"route": "unmatched", "method": "GET", "status": "4xx"},
        {"route": "/poppy/conversations", "method": "POST", "status": "2xx"},
    ]:
        assert labels in requests, (labels, requests)
    assert {labels["status"] for labels in requests} <= {"2xx", "3xx", "4xx", "499"}, requests

    readiness = {
        point["labels"]["check"]: point["value"]
        for point in _points(folder, "poppy.readiness.failing")
    }
    assert readiness and set(readiness.values()) == {0}, readiness
