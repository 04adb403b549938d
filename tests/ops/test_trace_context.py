"""An incoming W3C ``traceparent`` on the endpoint: by default the request's span starts a
trace of its own, linked to the caller's (a personal agent chooses neither our trace ids nor
our sampling); with ``POPPY["TRUST_TRACEPARENT"]`` the caller's trace goes on here, and the
turn it starts is in it. The example project as shipped with an SDK, in a process of its
own (the SDK is global)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
SCRIPT = f"""
import json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.test import Client, override_settings
from poppy_django.verifier.fake import fake_authorization

TRACEPARENT = "00-{CALLER_TRACE}-{CALLER_SPAN}-01"


def post(message_id):
    return Client().post(
        "/poppy/conversations",
        data=json.dumps({{"message": {{"id": message_id, "sender": "agent", "text": "hi"}}}}),
        content_type="application/json",
        HTTP_AUTHORIZATION=fake_authorization(),
        HTTP_TRACEPARENT=TRACEPARENT,
    )


def request_span():
    (found,) = [s for s in exporter.get_finished_spans() if s.name == "POST conversations"]
    return {{
        "trace": format(found.context.trace_id, "032x"),
        "parent": format(found.parent.span_id, "016x") if found.parent else None,
        "links": [format(link.context.span_id, "016x") for link in found.links],
    }}


assert post("m-1").status_code == 201
untrusted = request_span()
exporter.clear()
with override_settings(POPPY={{**__import__("django.conf").conf.settings.POPPY,
                               "TRUST_TRACEPARENT": True}}):
    assert post("m-2").status_code == 201
trusted = request_span()
print("SPANS", json.dumps({{"untrusted": untrusted, "trusted": trusted}}))
"""


def test_an_incoming_traceparent_is_linked_or_continued(tmp_path: Path) -> None:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("POPPY_", "DJANGO_", "OTEL_"))
    }
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env={
            **clean,
            "DJANGO_SETTINGS_MODULE": "example_project.settings",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'example.sqlite3'}",
            "POPPY_AUTHENTICATE": "poppy_django.verifier.fake.verify",
            "POPPY_VAR_DIR": str(tmp_path),
        },
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("SPANS ")]
    spans = json.loads(line.removeprefix("SPANS "))
    # By default: a trace of our own, which links to the caller's span.
    assert spans["untrusted"]["trace"] != CALLER_TRACE
    assert spans["untrusted"]["parent"] is None
    assert spans["untrusted"]["links"] == [CALLER_SPAN]
    # Trusted: the caller's trace goes on, the request's span a child of the caller's.
    assert spans["trusted"] == {"trace": CALLER_TRACE, "parent": CALLER_SPAN, "links": []}
