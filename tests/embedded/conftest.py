"""The embedded tests run only on the embedded settings: ``--ds=tests.settings_embedded``."""

import pytest
from django.conf import settings
from django.utils.module_loading import import_string

from poppy_django.engine.executors import ThreadExecutor


def _embedded() -> bool:
    return (
        settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
        and import_string(settings.POPPY["EXECUTOR"]) is ThreadExecutor
        and not getattr(settings, "EVENTSTREAM_REDIS", None)
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if _embedded():
        return
    skip = pytest.mark.skip(reason="embedded-mode test: run with --ds=tests.settings_embedded")
    for item in items:
        if "tests/embedded/" in str(item.fspath):
            item.add_marker(skip)
