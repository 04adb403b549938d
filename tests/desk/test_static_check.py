"""W202: in production the desk's scripts and styles are collected to be served; served by
uvicorn alone the desk was unstyled and said "Connecting…" for ever, and no check noticed."""

from __future__ import annotations

from pathlib import Path

from django.core import checks
from django.core.management import call_command


def w202(settings) -> list[checks.CheckMessage]:
    return [m for m in checks.run_checks() if m.id == "poppy_django.W202"]


def test_without_static_root_the_desk_is_served_by_nothing(settings) -> None:
    settings.DEBUG = False
    settings.STATIC_ROOT = None
    (found,) = w202(settings)
    assert "STATIC_ROOT is not set" in found.msg
    assert "collectstatic" in found.hint and "WhiteNoise" in found.hint


def test_not_collected_then_collected(settings, tmp_path: Path) -> None:
    settings.DEBUG = False
    settings.STATIC_ROOT = str(tmp_path)
    (found,) = w202(settings)
    assert "not in STATIC_ROOT" in found.msg and "collectstatic" in found.hint
    call_command("collectstatic", interactive=False, verbosity=0)
    assert w202(settings) == []


def test_in_development_django_serves_them(settings) -> None:
    settings.STATIC_ROOT = None  # DEBUG as tests.settings says: True
    assert w202(settings) == []


def test_collectstatic_itself_is_not_told_to_run_collectstatic(settings, tmp_path: Path) -> None:
    from io import StringIO

    settings.DEBUG = False
    settings.STATIC_ROOT = str(tmp_path)
    said = StringIO()
    call_command("collectstatic", interactive=False, skip_checks=False, stdout=said, stderr=said)
    assert "W202" not in said.getvalue()
