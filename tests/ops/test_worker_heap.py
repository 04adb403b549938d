"""A Celery worker process freezes its start-up heap out of the garbage collector.

``heap.settle`` changes the whole interpreter's collector, so it runs in a child Python with
the test settings, never in the test process; the receivers that call it are checked here
with the settle and the sweep recorded instead of run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from poppy_django import tasks
from poppy_django.engine import heap
from poppy_django.engine.recovery import sweeper

ROOT = Path(__file__).resolve().parents[2]


def _settled_interpreter(before: str = "") -> dict[str, object]:
    """What a fresh interpreter's collector looks like after ``heap.settle()``."""
    script = textwrap.dedent(
        f"""
        import gc, json, sys
        import django
        django.setup()
        from django.test import override_settings
        from django.conf import settings
        {before}
        imported_before = "pydantic_ai" in sys.modules
        threshold_before = gc.get_threshold()
        with override_settings(POPPY={{**settings.POPPY, "MODELS": {{"sales": "test"}}}}):
            from poppy_django.engine import heap
            heap.settle()
        print(json.dumps({{
            "frozen": gc.get_freeze_count(),
            "threshold_before": threshold_before,
            "threshold": gc.get_threshold(),
            "imported_before": imported_before,
            "imported_after": "pydantic_ai" in sys.modules,
        }}))
        """
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_settling_freezes_the_heap_and_spaces_the_young_collections() -> None:
    found = _settled_interpreter()
    # Django, the apps and the models' code: far more than a bare interpreter's objects.
    assert isinstance(found["frozen"], int) and found["frozen"] > 50_000
    before, after = found["threshold_before"], found["threshold"]
    assert isinstance(before, list) and isinstance(after, list)
    assert before[0] < heap.YOUNG_GENERATION_THRESHOLD
    assert after == [heap.YOUNG_GENERATION_THRESHOLD, *before[1:]]  # older ones as they were


def test_the_configured_models_code_is_imported_before_the_freeze() -> None:
    found = _settled_interpreter()
    assert found["imported_before"] is False
    assert found["imported_after"] is True


def test_a_project_s_own_higher_threshold_is_kept() -> None:
    found = _settled_interpreter(before="gc.set_threshold(50_000, 20, 30)")
    assert found["threshold"] == [50_000, 20, 30]


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr(heap, "settle", lambda: calls.append("settle"))
    monkeypatch.setattr(sweeper, "start", lambda: calls.append("sweep"))
    monkeypatch.setattr(tasks, "_per_child", False)
    return calls


@pytest.mark.parametrize("pool", ["threads", "solo"])
def test_a_threads_or_solo_worker_settles_when_ready(pool: str, recorded: list[str]) -> None:
    tasks._check_pool(sender=SimpleNamespace(pool_cls=pool))
    tasks._start_recovery()
    assert recorded == ["settle", "sweep"]


def test_each_prefork_child_settles_as_it_starts(recorded: list[str]) -> None:
    tasks._check_pool(sender=SimpleNamespace(pool_cls="prefork"))
    tasks._start_engine()
    tasks._start_recovery()  # the parent, once ready: its children have done it
    assert recorded == ["settle", "sweep"]
