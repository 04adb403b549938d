"""The core system checks: each id fires on its misconfiguration, and only then."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.conf import settings
from django.core import checks as django_checks
from django.test import override_settings

from poppy_django.checks import check_auth, check_settings
from poppy_django.checks import production as production_checks

CELERY = "poppy_django.engine.executors.CeleryExecutor"
REDIS_FANOUT = {"host": "127.0.0.1", "port": 6379, "db": 15}
REDIS_CACHE = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://127.0.0.1:6379/15",
    }
}
#: A production configuration every check is happy with (DEBUG=False).
GOOD_PRODUCTION = {
    "BASE_URL": "https://api.acme.example",
    "AUTHENTICATE": "poppy_django.verifier.fake.verify",
    "EXECUTOR": CELERY,
    "DEV_AUTHORITY": False,
}


@contextmanager
def configured(debug: bool = True, **poppy: Any) -> Iterator[None]:
    """The test settings' POPPY with ``poppy`` on top."""
    merged = {**settings.POPPY, **poppy}
    with override_settings(DEBUG=debug, POPPY=merged):
        yield


def ids(debug: bool = True, **poppy: Any) -> list[str]:
    with configured(debug, **poppy):
        return sorted(message.id or "" for message in check_settings())


@contextmanager
def production(**extra_settings: Any) -> Iterator[None]:
    values = {
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/15",
        "EVENTSTREAM_REDIS": REDIS_FANOUT,
        "CACHES": REDIS_CACHE,
        **extra_settings,
    }
    with override_settings(**values):
        yield


def test_the_example_project_passes():
    assert ids() == []


def test_a_good_production_configuration_passes():
    with production():
        assert ids(debug=False, **GOOD_PRODUCTION) == []


# -- E001 ... E003, W001: the original checks ---------------------------------------------


@pytest.mark.parametrize("key", ["AUTHENTICATE", "ACTOR_FOR", "EXECUTOR", "ACTION_FORMATTER"])
def test_e001_an_import_string_that_cannot_be_imported(key):
    assert ids(**{key: "nowhere.at_all"}) == ["poppy_django.E001"]


def test_e001_a_hook_that_cannot_be_imported():
    assert ids(HANDOFF_HOOKS={"request": "nowhere.at_all"}) == ["poppy_django.E001"]
    assert ids(DIRECT_HOOKS={"opened": "nowhere.at_all"}) == ["poppy_django.E001"]


def test_w001_no_verifier():
    assert ids(AUTHENTICATE=None) == ["poppy_django.W001"]


def test_e002_actions_policy():
    assert ids(ACTIONS="approve-all") == ["poppy_django.E002"]
    assert ids(ACTIONS="reject") == []


def test_e003_heartbeat_not_shorter_than_the_lease():
    assert ids(LEASE_SECONDS=10.0, HEARTBEAT_SECONDS=10.0) == ["poppy_django.E003"]
    assert ids(LEASE_SECONDS=10.0, HEARTBEAT_SECONDS=3.0) == []


# -- W002, W003: embedded pieces with DEBUG=False ----------------------------------------


def test_w002_w003_the_embedded_default_in_production():
    with override_settings(CACHES=REDIS_CACHE):
        embedded = {**GOOD_PRODUCTION, "EXECUTOR": "poppy_django.engine.executors.ThreadExecutor"}
        assert ids(debug=False, **embedded) == ["poppy_django.W002", "poppy_django.W003"]
        assert ids(debug=True, **embedded) == []
    with production():
        assert ids(debug=False, **embedded) == ["poppy_django.W002"]


# -- E004: unknown keys --------------------------------------------------------------------


def test_e004_unknown_poppy_keys_are_a_check_error_not_a_crash():
    # Every check, Django's URL checks included (poppy_django.urls tolerates a bad dict).
    with configured(PAGESIZE=50):
        messages = django_checks.run_checks()
    poppy = [m for m in messages if (m.id or "").startswith("poppy_django.E")]
    assert [m.id for m in poppy] == ["poppy_django.E004"]
    assert "PAGESIZE" in poppy[0].msg


def test_e004_alone_when_the_dict_is_unreadable():
    with configured(PAGESIZE=50, ACTIONS="bogus"):
        assert [m.id for m in check_settings()] == ["poppy_django.E004"]
        assert check_auth() == []  # no crash: the auth checks wait for E004 to be fixed
    with override_settings(POPPY=["AGENT", "support"]):
        assert [m.id for m in check_settings()] == ["poppy_django.E004"]


@pytest.mark.parametrize(
    "key, value",
    [
        ("DISCOVERY", {"ORGANISATION": {}}),
        ("TEXTS", {"failed_trun": "Oops."}),
        ("HANDOFF_HOOKS", {"requested": "example_project.shop.desk.request_handoff"}),
        ("DIRECT_HOOKS", {"open": "example_project.shop.desk.cancel_handoff"}),
        ("TEXTS", "Oops."),
    ],
)
def test_e004_unknown_keys_inside_dict_settings(key, value):
    assert ids(**{key: value}) == ["poppy_django.E004"]


# -- E005: out of range ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "key, bad, good",
    [
        ("PAGE_SIZE", 0, 1),
        ("PAGE_SIZE", 1001, 1000),
        ("PAGE_SIZE", 50.0, 50),
        ("PAGE_SIZE", "100", 100),
        ("WAIT_MAX_SECONDS", 0, 0.5),
        ("WAIT_MAX_SECONDS", 31, 30),
        ("WAIT_MAX_SECONDS", -1, 10),
        ("MAX_BODY_BYTES", 100, 1024),
        ("MAX_BODY_BYTES", 64 * 1024 * 1024, 2 * 1024 * 1024),
        ("MAX_BODY_BYTES", True, 4096),
        ("EXECUTOR_THREADS", 0, 1),
        ("STREAM_MAX_SECONDS", 0, 60),
        ("RETENTION_SECONDS", -5, 86400),
        ("HANDOFF_WARN_AT", 1.5, 0.9),
        ("DESK_CAPACITY", -1, None),
        ("DESK_CAPACITY", 2.5, 0),
    ],
)
def test_e005_numbers_out_of_range(key, bad, good):
    assert ids(**{key: bad}) == ["poppy_django.E005"]
    assert ids(**{key: good}) == []


# -- W004: retention -------------------------------------------------------------------------


def test_w004_retention_shorter_than_the_resume_window():
    assert ids(RETENTION_SECONDS=600) == ["poppy_django.W004"]
    assert ids(RETENTION_SECONDS=3599) == ["poppy_django.W004"]
    assert ids(RETENTION_SECONDS=3600) == []
    assert ids(RETENTION_SECONDS=None) == []
    # Longer streams widen the window.
    assert ids(RETENTION_SECONDS=7200, STREAM_MAX_SECONDS=7201) == ["poppy_django.W004"]
    assert ids(RETENTION_SECONDS=30 * 86400) == []


# -- E006, W005: production mode needs Redis (a broker, and fan-out) --------------------------


def test_e006_celery_executor_without_a_broker(monkeypatch):
    monkeypatch.setattr(production_checks, "celery_broker_url", lambda: None)
    with override_settings(EVENTSTREAM_REDIS=REDIS_FANOUT):
        assert ids(EXECUTOR=CELERY) == ["poppy_django.E006"]


def test_the_broker_is_found_in_settings_or_the_environment(monkeypatch):
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:6379/1"):
        assert production_checks.celery_broker_url() == "redis://127.0.0.1:6379/1"
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://broker.internal:6379/0")
    assert production_checks.celery_broker_url() in {
        "redis://broker.internal:6379/0",  # through the Celery app's configuration
        getattr(settings, "CELERY_BROKER_URL", None),
    }


def test_w005_celery_executor_without_redis_fan_out():
    with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:6379/15"):
        assert ids(EXECUTOR=CELERY) == ["poppy_django.W005"]
        # With DEBUG=False it is still W005, and W003 does not repeat it.
        with override_settings(CACHES=REDIS_CACHE):
            assert ids(debug=False, **GOOD_PRODUCTION) == ["poppy_django.W005"]


def test_no_production_mode_checks_for_the_thread_executor():
    assert ids(EXECUTOR="poppy_django.engine.executors.ThreadExecutor") == []


# -- E007, W006: agents and models ------------------------------------------------------------


def test_e007_the_agent_is_not_registered():
    assert ids(AGENT="sales") == ["poppy_django.E007"]


#: The parts about real LLMs need the llm extra (tox's noextras env has not got it).
needs_llm = pytest.mark.skipif(
    importlib.util.find_spec("pydantic_ai") is None, reason="needs the llm extra"
)


def test_w006_models_for_unknown_agents_or_unusable_models():
    assert ids(MODELS={"salse": "scripted"}) == ["poppy_django.W006"]
    assert ids(MODEL="no-such-provider:model") == ["poppy_django.W006"]
    assert ids(MODELS={"support": "no-such-provider:model"}) == ["poppy_django.W006"]


@needs_llm
def test_w006_not_for_a_model_that_can_be_built():
    assert ids(MODEL="test") == []  # pydantic-ai's offline test model


def test_w006_for_a_scripted_model_whose_rules_cannot_be_found():
    assert ids(MODEL="scripted:example_project.shop.agent.SCRIPT") == []
    assert ids(MODEL="scripted:example_project.shop.agent.NOPE") == ["poppy_django.W006"]
    assert ids(MODEL="scripted:example_project.shop.agent.ORDER") == ["poppy_django.W006"]


def test_w006_hint_for_scripted_rules_names_the_setting():
    with configured(MODEL="scripted:example_project.shop.agent.NOPE"):
        (warning,) = check_settings()
    assert "scripted:yourapp.agent.SCRIPT" in warning.hint


@needs_llm
def test_w006_hint_with_the_llm_extra_installed_asks_for_the_key():
    with configured(MODEL="openai:gpt-4o"):  # pydantic-ai is installed: the key is missing
        messages = [m for m in check_settings() if m.id == "poppy_django.W006"]
    assert messages and "llm extra" not in messages[0].hint and "API key" in messages[0].hint


@needs_llm
def test_w006_a_mistyped_provider_suggests_the_name_meant():
    """pydantic-ai compares whole names: it suggested another provider's model altogether."""
    with configured(MODEL="opneai:gpt-4o"):
        (warning,) = check_settings()
    assert "Did you mean 'openai:gpt-4o'?" in warning.msg
    assert warning.msg.count("Did you mean") == 1
    with configured(MODEL="gpt-4o"):
        (warning,) = check_settings()
    assert "'provider:gpt-4o'" in warning.msg


# -- E011: the Celery app dispatching is the project's ----------------------------------------


@contextmanager
def current_celery_app(app: Any) -> Iterator[None]:
    """``app`` as this thread's current Celery app (the project's is current otherwise)."""
    from celery import current_app

    before = current_app._get_current_object()
    app.set_current()
    try:
        yield
    finally:
        before.set_current()


def test_e011_the_project_celery_app_never_imported():
    from celery import Celery

    # What Celery falls back to when no app of the project's was created in the process.
    fallback = Celery("default", fixups=[], set_as_current=False, loader="default")
    with production(), current_celery_app(fallback), configured(EXECUTOR=CELERY):
        (error,) = check_settings()
    assert error.id == "poppy_django.E011"
    assert "Celery's fallback app (broker amqp://guest:**@localhost:5672//)" in error.msg
    assert error.hint.startswith("Import your Celery app when Django starts: in ")
    assert "'from .celery import app as celery_app'" in error.hint


def test_e011_a_celery_app_that_ignores_the_settings():
    from celery import Celery

    ignores_settings = Celery("mysite", fixups=[], set_as_current=False)
    with production(), current_celery_app(ignores_settings), configured(EXECUTOR=CELERY):
        (error,) = check_settings()
    assert error.id == "poppy_django.E011"
    assert "not to CELERY_BROKER_URL redis://127.0.0.1:6379/15" in error.msg
    assert "namespace='CELERY'" in error.hint


# -- E012: the routes personal agents are sent to ---------------------------------------------


def url_ids(**settings_values: Any) -> list[str]:
    with override_settings(**settings_values):
        return [m.id or "" for m in django_checks.run_checks() if m.id == "poppy_django.E012"]


def test_e012_the_endpoint_or_poppy_json_not_in_the_urlconf():
    from tests.ops import mistaken_projects

    assert url_ids() == []
    with override_settings(ROOT_URLCONF=mistaken_projects.WithoutTheEndpoint):
        (error,) = [m for m in django_checks.run_checks() if m.id == "poppy_django.E012"]
    assert "The conversation endpoint is not in the URLconf" in error.msg
    assert "/poppy/conversations answers 404" in error.msg
    assert error.hint == 'Add path("", include("poppy_django.urls")) to your urlpatterns.'
    with override_settings(ROOT_URLCONF=mistaken_projects.WithoutPoppyJson):
        (error,) = [m for m in django_checks.run_checks() if m.id == "poppy_django.E012"]
    assert "/.well-known/poppy.json answers 404" in error.msg
    assert 'include("poppy_django.wellknown_urls")' in error.hint


# -- W009: the ASGI application wrapped in PoppyBodyLimit -------------------------------------


def asgi_warnings(application: str | None, wsgi: str | None = None) -> list[Any]:
    with override_settings(ASGI_APPLICATION=application, WSGI_APPLICATION=wsgi):
        return [m for m in django_checks.run_checks() if m.id == "poppy_django.W009"]


def test_w009_an_asgi_application_without_the_body_limit():
    (warning,) = asgi_warnings("tests.ops.mistaken_projects.unwrapped")
    assert "tests.ops.mistaken_projects.unwrapped is not wrapped in PoppyBodyLimit" in warning.msg
    assert "ASGI 'lifespan' protocol appears unsupported." in warning.msg
    assert "In tests/ops/mistaken_projects.py: from poppy_django.asgi import" in warning.hint
    assert "application = PoppyBodyLimit(get_asgi_application())" in warning.hint


def test_w009_not_when_wrapped_even_inside_another_middleware():
    assert asgi_warnings("tests.ops.mistaken_projects.wrapped_inside_another") == []
    assert asgi_warnings("example_project.asgi.application") == []


def test_w009_finds_asgi_py_beside_wsgi_py_as_startproject_writes_them():
    assert asgi_warnings(None, wsgi="example_project.wsgi.application") == []
    with override_settings(ASGI_APPLICATION=None, WSGI_APPLICATION="tests.ops.wsgi.application"):
        from poppy_django.checks.serving import asgi_application_path

        assert asgi_application_path() is None  # no tests.ops.asgi: nothing to judge
    assert asgi_warnings(None, wsgi=None) == []


# -- W007: https in production ----------------------------------------------------------------


def test_w007_plain_http_base_url_in_production():
    with production():
        plain = {**GOOD_PRODUCTION, "BASE_URL": "http://api.acme.example"}
        assert ids(debug=False, **plain) == ["poppy_django.W007"]
        assert ids(debug=True, **plain) == []


# -- E008: texts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key, text",
    [
        ("sign_in_required", "Sign in for {permission}."),
        ("handoff_unavailable", "Nobody: {}"),
        ("action_succeeded", "Done: {summary"),
        ("insufficient_scope", 42),
    ],
)
def test_e008_texts_the_app_cannot_format(key, text):
    assert ids(TEXTS={key: text}) == ["poppy_django.E008"]


def test_texts_with_the_available_fields_pass():
    texts = {
        "sign_in_required": "Sign in ({scope}).",
        "handoff_unavailable": "Nobody can join: {reason}",
        "action_failed": "{tool}: {summary_lower} failed ({error}).",
        "failed_turn": "Oops {not formatted}",
    }
    assert ids(TEXTS=texts) == []
    # A custom formatter chooses its own fields.
    custom = "tests.ops.test_checks.format_action_shouting"
    assert ids(ACTION_FORMATTER=custom, TEXTS={"action_failed": "{anything}"}) == []
    assert ids(TEXTS={"action_failed": "{anything}"}) == ["poppy_django.E008"]


def format_action_shouting(action: dict[str, Any], texts: dict[str, str]) -> str:
    return texts["action_failed"].format(anything=str(action.get("tool")).upper())


# -- E009: time zones -------------------------------------------------------------------------


def test_e009_use_tz_off():
    with override_settings(USE_TZ=False):
        assert ids() == ["poppy_django.E009"]


# -- E010: office hours ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hours",
    [
        "9-5",
        {"HOURS": {"mon-fri": "09:00-17:30"}, "OPEN": True},
        {"HOURS": {}},
        {"HOURS": {"monday": "09:00-17:00"}},
        {"HOURS": {"fri-mon": "09:00-17:00"}},
        {"HOURS": {"mon": "9am-5pm"}},
        {"HOURS": {"mon": "17:00-09:00"}},
        {"HOURS": {"mon": "09:00-24:30"}},
        {"HOURS": {"mon": "09:00-17:00"}, "TIME_ZONE": "Mars/Olympus"},
        {"HOURS": {"mon": "09:00-17:00"}, "CLOSED_DATES": ["25/12/2026"]},
    ],
)
def test_e010_office_hours_that_cannot_be_read(hours):
    with configured(OFFICE_HOURS=hours):
        assert ids() == ["poppy_django.E010"]


def test_office_hours_that_read_raise_nothing():
    hours = {
        "TIME_ZONE": "Europe/Paris",
        "HOURS": {"mon-fri": "09:00-12:30, 13:30-18:00", "sun": "00:00-24:00"},
        "CLOSED_DATES": ["2026-12-25"],
    }
    with configured(OFFICE_HOURS=hours):
        assert ids() == []


def test_e005_the_desks_numbers_are_in_range():
    with configured(STAFF_AWAY_AFTER_SECONDS=0, HANDOFF_MAX_WAIT_SECONDS=-5):
        assert ids() == ["poppy_django.E005", "poppy_django.E005"]
    with configured(HANDOFF_MAX_WAIT_SECONDS=None):
        assert ids() == []


# -- registration ---------------------------------------------------------------------------


def test_the_core_and_auth_checks_are_registered_and_run():
    registered = django_checks.registry.registry.get_checks()
    assert check_settings in registered and check_auth in registered
    with configured(debug=False, DEV_AUTHORITY=True):
        found = {m.id for m in django_checks.run_checks()}
    assert "poppy_django.E101" in found
