"""``path("", include("poppy_django.health_urls"))``: the liveness and readiness probes.

Mounted at ``POPPY["LIVENESS_PATH"]`` and ``POPPY["READINESS_PATH"]``, read when the URLconf
is imported (docs/operations.md says what each answers).
"""

from __future__ import annotations

from django.urls import path

from poppy_django.conf import poppy_settings
from poppy_django.observe import health

app_name = "poppy_health"

urlpatterns = [
    path(poppy_settings.LIVENESS_PATH.strip("/"), health.liveness, name="liveness"),
    path(poppy_settings.READINESS_PATH.strip("/"), health.readiness, name="readiness"),
]
