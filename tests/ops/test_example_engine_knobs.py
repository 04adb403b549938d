"""The example project sizes its turn engine from the environment, as it does its leases, so
the benchmarks and a deployment of it set ``TURNS_IN_FLIGHT`` and ``EXECUTOR_THREADS``
without a settings module of their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRINT_BOUNDS = (
    "import django; django.setup(); from poppy_django.conf import poppy_settings as s; "
    "import json; print(json.dumps([s.TURNS_IN_FLIGHT, s.EXECUTOR_THREADS]))"
)


def engine_bounds(**env: str) -> list[int]:
    """The example project's engine bounds, read in a fresh interpreter with ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("POPPY_", "DJANGO_"))}
    result = subprocess.run(
        [sys.executable, "-c", PRINT_BOUNDS],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "example_project.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_example_project_keeps_the_product_s_engine_bounds_by_default():
    assert engine_bounds() == [200, 8]


def test_the_example_project_reads_its_engine_bounds_from_the_environment():
    assert engine_bounds(POPPY_TURNS_IN_FLIGHT="1000", POPPY_EXECUTOR_THREADS="3") == [1000, 3]
