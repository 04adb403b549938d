"""The maintained OpenTelemetry instrumentations that do the generic part, turned on with the
SDK: database and Redis spans, Celery's own spans with its context carried in task headers,
and the HTTP client's: a span for each request of ``httpx`` and of ``httpx2`` (the model
client's: pydantic-ai's OpenAI provider speaks through ``httpx2``, which the ``httpx``
instrumentor does not see), with the trace context sent on. Neither records a header.

Each is an optional package (the ``telemetry`` extra installs them); one that is not
installed is skipped. They patch their library when :func:`instrument` runs, which
:func:`poppy_django.observe.sdk.configure` calls once it has installed a provider: a process
without an SDK patches nothing and pays nothing. A deployment that starts its processes under
``opentelemetry-instrument`` gets them from there instead (an instrumentor already on is left
as it is).

The app's own spans and metrics stay hand-made where they are the domain's (turns, model
calls, handoffs, refusals, the broker's backlog) or where the maintained one does not fit:
docs/operations.md ("What is hand-made") lists them, and why.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

logger = logging.getLogger("poppy_django.observe")

#: name -> (module, instrumentor class), in the order they are turned on.
INSTRUMENTORS = {
    "celery": ("opentelemetry.instrumentation.celery", "CeleryInstrumentor"),
    "psycopg": ("opentelemetry.instrumentation.psycopg", "PsycopgInstrumentor"),
    "redis": ("opentelemetry.instrumentation.redis", "RedisInstrumentor"),
    "httpx": ("opentelemetry.instrumentation.httpx", "HTTPXClientInstrumentor"),
    "httpx2": ("opentelemetry.instrumentation.httpx", "HTTPX2ClientInstrumentor"),
}


def _instrumentor(module: str, name: str) -> Any | None:
    try:
        return getattr(importlib.import_module(module), name)()
    except ImportError:
        return None


def instrument() -> list[str]:
    """Turn on every installed instrumentation not already on; the names of those on."""
    on: list[str] = []
    for name, (module, cls) in INSTRUMENTORS.items():
        instrumentor = _instrumentor(module, cls)
        if instrumentor is None:
            continue
        if not instrumentor.is_instrumented_by_opentelemetry:
            try:
                instrumentor.instrument()
            except Exception:  # a version mismatch must not stop the process
                logger.warning("poppy: the %s instrumentation failed to start", name, exc_info=True)
                continue
        if instrumentor.is_instrumented_by_opentelemetry:  # not when its library is missing
            on.append(name)
    return on
