"""docs/logging.md's recipe, as written: a 500 on a route an agent calls is one JSON line
under django.request with its kind (the wrong-REDIS_URL mistake of issue 42)."""

from __future__ import annotations

import io
import json
import logging
import logging.config
import re
import sys
import types
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.test import Client

from tests.multiprocess.cluster import free_port

PAGE = Path(__file__).resolve().parents[2] / "docs" / "logging.md"


def recipe() -> tuple[str, str]:
    blocks = re.findall(r"```python\n(.*?)\n```", PAGE.read_text(), re.S)
    formatter = next(b for b in blocks if b.startswith("# mysite/logging.py"))
    settings = next(b for b in blocks if b.startswith("# mysite/settings.py\nLOGGING"))
    return formatter, settings


@pytest.fixture
def recipe_logging(monkeypatch) -> io.StringIO:
    formatter, settings = recipe()
    module = types.ModuleType("mysite.logging")
    exec(formatter, module.__dict__)
    package = types.ModuleType("mysite")
    package.logging = module  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "mysite", package)
    monkeypatch.setitem(sys.modules, "mysite.logging", module)
    namespace: dict[str, object] = {}
    exec(settings, namespace)
    config = namespace["LOGGING"]
    stream = io.StringIO()
    config["handlers"]["stdout"]["stream"] = stream  # type: ignore[index]
    loggers = [logging.getLogger(name) for name in ("django.request", "poppy_django")]
    saved = [(one.handlers[:], one.propagate, one.level) for one in loggers]
    logging.config.dictConfig(config)  # type: ignore[arg-type]
    yield stream
    for one, (handlers, propagate, level) in zip(loggers, saved):
        one.handlers[:], one.propagate, one.level = handlers, propagate, level


@pytest.mark.django_db
def test_a_500_is_logged_with_its_kind(settings, recipe_logging) -> None:
    settings.DEBUG = False
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
        }
    }
    form = {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer"}
    form["client_id"] = "https://agent.example/client"
    response = Client(raise_request_exception=False, HTTP_HOST="localhost").post(
        "/oauth/token", urlencode(form), content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 500
    lines = [json.loads(line) for line in recipe_logging.getvalue().splitlines()]
    (logged,) = [line for line in lines if line["logger"] == "django.request"]
    assert logged["level"] == "ERROR" and "/oauth/token" in logged["msg"]
    assert logged["error"].startswith("redis.exceptions.ConnectionError")
    assert "Traceback" in logged["exc"]
