"""``path("", include("poppy_django.health_urls"))``: the probes, and the metrics if served.

Mounted at ``POPPY["LIVENESS_PATH"]``, ``POPPY["READINESS_PATH"]`` and, when set,
``POPPY["METRICS_PATH"]``, read when the URLconf is imported (docs/operations.md says what
each answers).
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS
from django.urls import URLPattern, path

from poppy_django.conf import DEFAULTS, poppy_settings
from poppy_django.observe import health
from poppy_django.store.backends import for_alias

app_name = "poppy_health"


def _path(key: str) -> str | None:
    """Where a probe is mounted; the default while ``POPPY`` cannot be read, so that
    ``manage.py check`` (which imports the URLconf) reports why (E004) instead of crashing."""
    try:
        value: str | None = getattr(poppy_settings, key)
    except ImproperlyConfigured:
        value = DEFAULTS[key]
    return value.strip("/") if value else None


urlpatterns: list[URLPattern] = [
    path(_path("LIVENESS_PATH") or "", health.liveness, name="liveness"),
    path(
        _path("READINESS_PATH") or "",
        health.Readiness.as_view(database=lambda: for_alias(DEFAULT_DB_ALIAS).answers()),
        name="readiness",
    ),
]
if (metrics_path := _path("METRICS_PATH")) is not None:
    # Only when served: prometheus-client is the observability extra's, not the core's.
    from poppy_django.observe import prometheus

    urlpatterns.append(path(metrics_path, prometheus.metrics_view, name="metrics"))
