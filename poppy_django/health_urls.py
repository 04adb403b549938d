"""``path("", include("poppy_django.health_urls"))``: the probes, and the metrics if served.

Mounted at ``POPPY["LIVENESS_PATH"]``, ``POPPY["READINESS_PATH"]`` and, when set,
``POPPY["METRICS_PATH"]``, read when the URLconf is imported (docs/operations.md says what
each answers).
"""

from __future__ import annotations

from django.urls import URLPattern, path

from poppy_django.conf import poppy_settings
from poppy_django.observe import health

app_name = "poppy_health"

urlpatterns: list[URLPattern] = [
    path(poppy_settings.LIVENESS_PATH.strip("/"), health.liveness, name="liveness"),
    path(poppy_settings.READINESS_PATH.strip("/"), health.readiness, name="readiness"),
]
if poppy_settings.METRICS_PATH:
    from poppy_django.observe import prometheus

    urlpatterns.append(
        path(poppy_settings.METRICS_PATH.strip("/"), prometheus.metrics_view, name="metrics")
    )
