import pytest
from django.conf import settings


@pytest.fixture(autouse=True)
def _embedded_only() -> None:
    """These tests are about the embedded default: refuse to run them on another setup."""
    assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
    assert settings.POPPY["EXECUTOR"] == "poppy_django.executors.ThreadExecutor"
    assert not getattr(settings, "EVENTSTREAM_REDIS", None)
