"""A test run is not production: the runner's DEBUG=False does not stop an adopter's suite.

pytest-django forces DEBUG=False as Django's runner does; tests.settings says DEBUG = True.
"""

from __future__ import annotations

from django.conf import settings
from django.core import checks
from django.test import override_settings

from poppy_django.authority import development
from poppy_django.conf import debug_configured


def ids(messages: list[checks.CheckMessage]) -> set[str]:
    return {message.id for message in messages if message.id}


def test_the_runner_forces_debug_off_but_the_project_is_in_development() -> None:
    assert settings.DEBUG is False  # the runner's doing
    assert debug_configured() is True
    found = ids(checks.run_checks())
    assert not {"poppy_django.E101", "poppy_django.W002", "poppy_django.W007"} & found, found
    assert development.enabled()


def test_a_test_that_sets_debug_off_is_judged_as_production() -> None:
    with override_settings(DEBUG=False):
        assert debug_configured() is False
        assert not development.enabled()
        found = ids(checks.run_checks())
        assert {"poppy_django.E101", "poppy_django.W002"} <= found, found
        with override_settings(DEBUG=True):
            assert debug_configured() is True
        assert debug_configured() is False
    assert debug_configured() is True


def test_another_setting_overridden_keeps_the_projects_debug() -> None:
    """override_settings of anything (poppy_test_settings, STATIC_ROOT) is not production."""
    with override_settings(STATIC_ROOT=None, POPPY={**settings.POPPY}):
        assert debug_configured() is True
        assert development.enabled()
