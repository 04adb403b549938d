"""docs/logging.md's recipe, as written: Redis out of reach on a route an agent calls (the
wrong-REDIS_URL mistake of issue 42) is a 503 naming Redis, and one JSON line with its cause in
the server's words (issue 50)."""

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
def test_redis_out_of_reach_is_a_503_logged_with_its_cause(settings, recipe_logging) -> None:
    settings.DEBUG = False
    port = free_port()
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}/0",
        }
    }
    form = {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer"}
    form["client_id"] = "https://agent.example/client"
    response = Client(raise_request_exception=False, HTTP_HOST="localhost").post(
        "/oauth/token", urlencode(form), content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 503 and response["Retry-After"] == "5"
    body = response.json()
    assert body["error"] == "temporarily_unavailable"
    assert body["error_description"].startswith("Redis is unreachable. Try again in 5 seconds.")
    lines = [json.loads(line) for line in recipe_logging.getvalue().splitlines()]
    (logged,) = [line for line in lines if line["logger"] == "poppy_django.views"]
    assert logged["level"] == "WARNING" and "requests reaching Redis failed" in logged["msg"]
    # The cause in Redis's words (a connection-level error quotes no data).
    assert logged["error"].startswith("redis.exceptions.ConnectionError: Error 111 connecting")
    assert f":{port}. Connection refused." in logged["error"]
    assert "Traceback" in logged["exc"]
