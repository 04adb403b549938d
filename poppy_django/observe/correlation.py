"""Each log record named with the request and the trace it belongs to.

:class:`Correlate` is a logging filter for a project's handlers: it sets ``request_id`` (the
request that is being served, or the one whose message started the turn being run) and
``trace_id`` (with an OpenTelemetry SDK) on every record, empty when there is none, so a
format can name them (docs/logging.md#correlation). Both travel with a turn from the web
process through the Celery task onto the engine's loop and database threads
(:mod:`poppy_django.observe.tracing`).
"""

from __future__ import annotations

import logging

from poppy_django.observe import tracing
from poppy_django.observe.request_id import request_id


class Correlate(logging.Filter):
    """Sets ``record.request_id`` and ``record.trace_id``; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get() or ""
        ids = tracing.current_ids()
        record.trace_id = ids[0] if ids is not None else ""
        return True
