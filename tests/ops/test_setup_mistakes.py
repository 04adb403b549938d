"""A newcomer's set-up mistakes (issue 27): each answer or log line names the fix."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.core import checks
from django.test import Client

from poppy_django.engine import dispatch
from poppy_django.engine.broker_health import REPORT_INTERVAL, BrokerHealth, redacted
from poppy_django.models import Conversation
from poppy_django.verifier import dpop
from tests.agents import PersonalAgent
from tests.multiprocess.cluster import ROOT, free_port

SECRET = "my-private-words-7f3a"

#: Posts one message to the example project in a fresh process whose SQLite database was
#: never migrated, and prints the answer.
_UNMIGRATED = f"""
import json
from django.test import Client
from poppy_django.verifier.fake import fake_authorization
answer = Client(raise_request_exception=False, HTTP_HOST="localhost").post(
    "/poppy/conversations",
    data=json.dumps({{"message": {{"id": "m1", "sender": "agent", "text": "{SECRET}"}}}}),
    content_type="application/json",
    HTTP_AUTHORIZATION=fake_authorization("https://pa.example/c", "u1"),
)
print("ANSWER", answer.status_code, answer.content.decode())
"""


def test_forgetting_migrate_is_answered_and_logged_with_the_fix(tmp_path: Path) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    }
    env.update(
        POPPY_VAR_DIR=str(tmp_path),  # the test settings' SQLite database, never migrated
        DJANGO_SETTINGS_MODULE="tests.settings",
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", _UNMIGRATED],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    answer = next(line for line in result.stdout.splitlines() if line.startswith("ANSWER"))
    _, status, body = answer.split(" ", 2)
    assert status == "500"
    error = json.loads(body)
    assert error["error"] == "server_error"
    assert "run `python manage.py migrate`" in error["error_description"]
    assert "contenttypes.0001_initial" in error["error_description"]  # which, and how many
    # The log says the same, and keeps SQLite's "no such table" (schema, not data)...
    assert "run `python manage.py migrate`" in result.stderr, result.stderr
    assert "OperationalError: no such table: poppy_django_" in result.stderr, result.stderr
    # ...and never what the User wrote.
    assert SECRET not in result.stderr + result.stdout


#: Five recovery sweeps of the test settings' never-migrated SQLite database, back to back.
_SWEEPS = """
import threading
from django.conf import settings
from django.test.utils import override_settings
from poppy_django.engine import recovery

swept = []
stop = threading.Event()
original = recovery.sweep

def counted(event):
    swept.append(1)
    if len(swept) >= 5:
        stop.set()
    return original(event)

recovery.sweep = counted
with override_settings(POPPY={**settings.POPPY, "SWEEP_SECONDS": 0.01}):
    recovery.Sweeper._loop(stop)
print("SWEPT", len(swept))
"""


def test_the_recovery_sweep_says_migrate_once(tmp_path: Path) -> None:
    """It logged a traceback every ~5 s that never said "migrate"."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    }
    env.update(POPPY_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="tests.settings")
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", _SWEEPS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "SWEPT 5" in result.stdout, result.stdout + result.stderr
    assert result.stderr.count("run `python manage.py migrate`") == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr


# -- a broker the web process cannot reach ------------------------------------------------


@pytest.fixture
def unreachable_broker(settings) -> str:
    """Turns in Celery, and a broker URL (with credentials) where nothing listens."""
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    settings.CELERY_BROKER_URL = url
    settings.POPPY = {**settings.POPPY, "EXECUTOR": "poppy_django.engine.executors.CeleryExecutor"}
    return url


def test_redacted_broker_urls_keep_no_credentials() -> None:
    assert redacted("redis://:hunter2@cache:6380/2") == "redis://cache:6380/2"
    assert redacted("amqp://user:pw@rabbit/vhost") == "amqp://rabbit/vhost"
    assert redacted("redis://cache:6379/0") == "redis://cache:6379/0"


def test_failed_dispatches_are_told_once_per_interval(unreachable_broker, caplog) -> None:
    caplog.set_level(logging.INFO, logger="poppy_django.turns")
    health = BrokerHealth()
    error = ConnectionRefusedError(111, f"Connection refused {SECRET}")
    for number in range(5):
        health.failed(f"cnv_{number}", error)
    lines = [r.getMessage() for r in caplog.records if r.name == "poppy_django.turns"]
    assert len(lines) == 1, lines  # not one per message
    (line,) = lines
    broker = unreachable_broker.replace(":hunter2@", "")
    assert f"could not hand cnv_0 to the Celery broker {broker}" in line
    assert "hunter2" not in line and SECRET not in line
    assert "recovery sweep answers it, up to 35 s late" in line
    assert "check CELERY_BROKER_URL" in line
    problem = health.problem()
    assert problem is not None and problem.failures == 5
    # Past the interval, one more line with the count since the last.
    health._reported_at -= REPORT_INTERVAL
    health.failed("cnv_5", error)
    assert "5 dispatches failed since the last report" in caplog.records[-1].getMessage()
    health.succeeded()
    assert "works again" in caplog.records[-1].getMessage()
    assert health.problem() is None


@pytest.mark.django_db(transaction=True)
def test_a_message_is_acknowledged_and_the_broker_named(unreachable_broker, caplog) -> None:
    from poppy_django.engine.broker_health import health
    from tests.agents import PersonalAgent

    caplog.set_level(logging.INFO, logger="poppy_django.turns")
    try:
        response = PersonalAgent().start(SECRET)
        assert response.status_code == 201, response.content  # recorded: the sweep answers it
        assert dispatch.flush(timeout=10)  # the dispatch is made after the answer
        assert health.problem() is not None
    finally:
        health.succeeded()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "could not hand cnv_" in logged and "127.0.0.1" in logged
    assert "hunter2" not in logged and SECRET not in logged


def test_deploy_check_names_the_unreachable_broker(unreachable_broker) -> None:
    messages = [
        m for m in checks.run_checks(include_deployment_checks=True) if m.id == "poppy_django.W008"
    ]
    assert len(messages) == 1
    assert unreachable_broker.replace(":hunter2@", "") in messages[0].msg
    assert "hunter2" not in messages[0].msg
    assert "CELERY_BROKER_URL" in messages[0].hint
    assert (
        not [  # a plain `check` opens no connection
            m for m in checks.run_checks() if m.id == "poppy_django.W008"
        ]
    )


# -- DEBUG=False and a host not in ALLOWED_HOSTS -------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path", ["/poppy/conversations", "/poppy/conversations/cnv_x/events", "/.well-known/poppy.json"]
)
def test_a_host_not_allowed_is_named_in_json(settings, path: str) -> None:
    settings.DEBUG = False
    settings.ALLOWED_HOSTS = ["shop.example"]
    response = Client(HTTP_HOST="api.internal:8000").get(path)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["error"] == "invalid_request"
    assert "'api.internal:8000'" in body["error_description"]
    assert "ALLOWED_HOSTS" in body["error_description"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/oauth/token"),
        ("get", "/oauth/jwks.json"),
        ("post", "/oauth/device_authorization"),
        ("get", "/.well-known/oauth-authorization-server"),
    ],
)
def test_a_host_not_allowed_on_the_authoritys_routes_is_named_in_json(
    settings, method: str, path: str
) -> None:
    """The authorization server's routes answered Django's HTML 400 (poppy_chat printed it)."""
    settings.DEBUG = False
    settings.ALLOWED_HOSTS = ["shop.example"]
    response = getattr(Client(HTTP_HOST="api.internal:8000"), method)(path)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    assert "ALLOWED_HOSTS" in response.json()["error_description"]


def test_the_authoritys_pages_for_people_stay_html(settings) -> None:
    settings.DEBUG = False
    settings.ALLOWED_HOSTS = ["shop.example"]
    response = Client(HTTP_HOST="api.internal:8000").get("/device")
    assert response.status_code == 400
    assert not response["Content-Type"].startswith("application/json")


# -- a wrong REDIS_URL: the token endpoint's and the conversation endpoint's answer and log --
# -- name it --------------------------------------------------------------------------------

REDIS_CACHE = "django.core.cache.backends.redis.RedisCache"


def _unreachable(location: str) -> str:
    """The port of another service, or a whole URL that names no Redis at all."""
    if location == "port":
        return f"redis://127.0.0.1:{free_port()}/0"
    return "redis://redis.invalid:6379/0"


@pytest.mark.django_db
@pytest.mark.parametrize("location", ["port", "host"])
def test_redis_out_of_reach_is_a_json_503_naming_redis_url(settings, caplog, location) -> None:
    """The token endpoint, its client's replay and fetch records in the (Redis) cache."""
    settings.DEBUG = False
    settings.CACHES = {"default": {"BACKEND": REDIS_CACHE, "LOCATION": _unreachable(location)}}
    form = {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer"}
    form["client_id"] = "https://agent.example/client"
    with caplog.at_level(logging.WARNING, logger="poppy_django.views"):
        response = Client(raise_request_exception=False, HTTP_HOST="localhost").post(
            "/oauth/token", urlencode(form), content_type="application/x-www-form-urlencoded"
        )
    assert response.status_code == 503, response.content
    assert response["Content-Type"].startswith("application/json")
    assert response["Retry-After"] == "5"
    body = response.json()
    assert body["error"] == "temporarily_unavailable"
    assert body["error_description"].startswith("Redis is unreachable.")
    assert "REDIS_URL" in body["error_description"]
    assert "redis.invalid" not in body["error_description"]
    (logged,) = [r for r in caplog.records if r.name == "poppy_django.views"]
    assert "REDIS_URL" in logged.getMessage()
    assert "redis.exceptions.ConnectionError" in logged.poppy["error"]  # its kind, logged


@pytest.mark.django_db
@pytest.mark.parametrize("location", ["port", "host"])
def test_redis_out_of_reach_on_the_endpoint_is_a_json_503_naming_redis_url(
    settings, caplog, location, tmp_path
) -> None:
    """The conversation endpoint with the production verifier, whose DPoP proofs are recorded
    in the (Redis) replay cache: the same answer and log as the token endpoint's."""
    base = "http://testserver"
    settings.DEBUG = False
    settings.POPPY = {
        **settings.POPPY,
        "AUTHENTICATE": "poppy_django.verifier.dpop.verify",
        "BASE_URL": base,
        "ISSUER": None,
        "TOKENS": {},
        "DEV_AUTHORITY": {"KEY_FILE": str(tmp_path / "key.pem"), "ALLOW_WITHOUT_DEBUG": True},
    }
    dpop.reset()
    agent = PersonalAgent.with_session_token(base)
    agent.client = Client(raise_request_exception=False)
    settings.CACHES = {"default": {"BACKEND": REDIS_CACHE, "LOCATION": _unreachable(location)}}
    dpop.reset()
    try:
        with caplog.at_level(logging.WARNING):
            response = agent.post("", {"message": {"id": "m1", "sender": "agent", "text": "hi"}})
    finally:
        dpop.reset()
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "5"
    body = response.json()
    assert body["error"] == "temporarily_unavailable"
    assert "REDIS_URL" in body["error_description"]
    assert "redis.invalid" not in body["error_description"]
    # The app's own line: the fix and the failure's kind (once a streak: one line).
    (logged,) = [r for r in caplog.records if r.name == "poppy_django.views"]
    assert "REDIS_URL" in logged.getMessage()
    assert "redis.exceptions.ConnectionError" in logged.poppy["error"]
    assert not Conversation.objects.exists()  # refused before anything was written


# -- make demo on a port another server holds ------------------------------------------------


def test_make_demo_on_a_busy_port_names_the_fix_and_leaves_nothing(tmp_path: Path) -> None:
    """It printed "up at …" (the other server answered), then a JSONDecodeError, and left its
    temporary directory behind."""
    import http.server
    import threading

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    try:
        result = subprocess.run(
            [sys.executable, "-m", "example_project.demo", "--port", str(other.server_port)],
            cwd=ROOT,
            env={**env, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        other.shutdown()
        other.server_close()
    said = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"Port {other.server_port} is already in use" in said and "DEMO_PORT=" in said, said
    assert "is up at" not in said and "Traceback" not in said, said
    assert list(tmp_path.iterdir()) == []


# -- the project's Celery app never imported -------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_dispatch_through_celerys_fallback_app_is_refused_with_the_fix(settings, caplog):
    """Without ``from .celery import app as celery_app`` the web process dispatched through
    Celery's fallback app, which no worker reads: each reply came ~35 s late, silently."""
    from celery import Celery, current_app

    from poppy_django.engine.broker_health import health
    from tests.agents import PersonalAgent

    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/15"
    settings.POPPY = {**settings.POPPY, "EXECUTOR": "poppy_django.engine.executors.CeleryExecutor"}
    caplog.set_level(logging.INFO, logger="poppy_django.turns")
    project_app = current_app._get_current_object()
    # For every thread, as in a process that never imported it (the dispatch is made on
    # a thread of its own, after the answer).
    fallback = Celery("default", fixups=[], set_as_current=False, loader="default")
    fallback.set_default()
    fallback.set_current()
    try:
        response = PersonalAgent().start(SECRET)
        assert response.status_code == 201, response.content  # recorded: the sweep answers it
        assert dispatch.flush(timeout=10)  # the dispatch is made after the answer
    finally:
        project_app.set_default()
        project_app.set_current()
        health.succeeded()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "could not hand cnv_" in logged
    assert "Turns are not dispatched: this process dispatches them through Celery's" in logged
    assert "'from .celery import app as celery_app'" in logged
    assert SECRET not in logged


# -- the endpoint's include forgotten -------------------------------------------------------


def test_an_endpoint_not_in_the_urlconf_is_told_once_with_the_fix(settings, caplog):
    from poppy_django.api import middleware
    from tests.ops.mistaken_projects import WithoutTheEndpoint

    settings.ROOT_URLCONF = WithoutTheEndpoint
    middleware._tell_unrouted_once.cache_clear()
    for _ in range(2):
        answer = Client().post("/poppy/conversations", "{}", content_type="application/json")
        assert answer.status_code == 404 and answer.json()["error"] == "not_found"
    (line,) = [r.getMessage() for r in caplog.records if r.name == "poppy_django.views"]
    assert line.startswith("poppy: /poppy/conversations is not in the URLconf")
    assert 'add path("", include("poppy_django.urls"))' in line
    middleware._tell_unrouted_once.cache_clear()
