"""Outages named (issue 50): a connection-level error keeps the server's words in the log and
nowhere else, a failing loop is logged once a streak, and a page or the endpoint that meets
the database out of reach answers 503 with Retry-After naming it, never a 500.

The database here is really out of reach: the test's connection is pointed at a port where
nothing listens, so the driver's own error travels the app's own path.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterator

import psycopg
import pytest
from django.contrib.auth.models import Permission, User
from django.db import DatabaseError, connection
from django.test import Client

from poppy_django.observe.dependencies import unavailable
from poppy_django.observe.redaction import describe_failure
from poppy_django.observe.streaks import Streak
from tests.agents import PersonalAgent
from tests.multiprocess.cluster import free_port

DESK = "/admin/poppy_django/conversation/desk/"


def _refused() -> BaseException:
    """What Django raises when the database does not listen (its error, from psycopg's)."""
    port = free_port()
    try:
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/x", connect_timeout=2):
            pass
    except psycopg.OperationalError as driver:
        from django.db.utils import OperationalError

        wrapped = OperationalError(*driver.args)
        wrapped.__cause__ = driver
        return wrapped
    raise AssertionError("something listens there")


def test_a_connection_level_error_is_logged_in_the_servers_words() -> None:
    exc = _refused()
    logged = describe_failure(exc)
    assert logged.startswith("django.db.utils.OperationalError (psycopg.OperationalError): ")
    assert "Connection refused" in logged
    # What anyone reaching the server reads (readiness) keeps its kind, not its words.
    public = describe_failure(exc, public=True)
    assert public == "django.db.utils.OperationalError (psycopg.OperationalError; message withheld)"
    found = unavailable(exc)
    assert found is not None and found.dependency == "database" and not found.pool_timeout


@pytest.mark.django_db
def test_a_statements_error_keeps_its_message_withheld() -> None:
    """A statement's error may quote data: never a dependency out of reach, never its words."""
    with pytest.raises(DatabaseError) as raised, connection.cursor() as cursor:
        cursor.execute("SELECT %s::int", ["the user's secret words"])
    assert unavailable(raised.value) is None
    assert "secret" not in describe_failure(raised.value)


def test_a_failing_loop_is_logged_once_a_streak(caplog: pytest.LogCaptureFixture) -> None:
    streak = Streak(logging.getLogger("poppy_django.recovery"), "the recovery sweep")
    exc = _refused()
    with caplog.at_level(logging.INFO, logger="poppy_django.recovery"):
        for _ in range(50):
            streak.failed(exc)
        streak.succeeded()
        streak.succeeded()
        streak.failed(exc)
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in lines] == ["WARNING", "INFO", "WARNING"], lines
    assert lines[0][1].startswith("poppy: the recovery sweep failed: django.db.utils.Operational")
    assert "Connection refused" in lines[0][1]
    assert lines[1][1].startswith("poppy: the recovery sweep works again, after ")
    assert "50 failures" in lines[1][1]


def test_a_streak_whose_cause_flaps_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """PostgreSQL down: one try is refused, the next waits out the pool ("couldn't get a
    connection"): two causes, each warned about once, not a traceback at every try."""
    streak = Streak(logging.getLogger("poppy_django.recovery"), "the recovery sweep")
    refused, waited = _refused(), _pool_timeout()
    with caplog.at_level(logging.INFO, logger="poppy_django.recovery"):
        for _ in range(25):
            streak.failed(refused)
            streak.failed(waited)
        streak.succeeded()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == streak.logger.name]
    assert [level for level, _ in lines] == ["WARNING", "WARNING", "INFO"], lines
    assert "Connection refused" in lines[0][1] and "couldn't get a connection" in lines[1][1]
    assert "50 failures" in lines[2][1]


def _pool_timeout() -> BaseException:
    """What Django raises when its pool gives no connection in time (psycopg_pool's own)."""
    from django.db.utils import OperationalError
    from psycopg_pool import ConnectionPool

    port = free_port()
    with ConnectionPool(
        f"postgresql://postgres@127.0.0.1:{port}/x", min_size=0, max_size=1, timeout=0.1
    ) as pool:
        try:
            pool.getconn()
        except psycopg.OperationalError as driver:
            wrapped = OperationalError(*driver.args)
            wrapped.__cause__ = driver
            return wrapped
    raise AssertionError("something listens there")


@contextlib.contextmanager
def database_away() -> Iterator[None]:
    """This test's connection pointed at a port where nothing listens, then back."""
    port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = free_port()
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port


@pytest.mark.django_db(transaction=True)
def test_the_desk_with_the_database_away_is_a_readable_503() -> None:
    staff = User.objects.create_user("sam", password="pw", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="handle_conversations"))
    browser = Client(raise_request_exception=False)
    browser.force_login(staff)
    with database_away():
        page = browser.get(DESK, HTTP_ACCEPT="text/html")
        read = browser.get(f"{DESK}alerts.json", HTTP_ACCEPT="application/json")
    assert page.status_code == 503 and page["Retry-After"] == "5"
    text = page.content.decode()
    assert "Temporarily unavailable" in text and "The database is unreachable." in text
    assert 'http-equiv="refresh"' in text  # a GET tries again by itself
    assert read.status_code == 503 and read["Retry-After"] == "5"
    assert read.json() == {
        "error": "temporarily_unavailable",
        "error_description": "The database is unreachable. Try again in 5 seconds.",
    }


@pytest.mark.django_db(transaction=True)
def test_the_endpoint_with_the_database_away_is_a_json_503(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = PersonalAgent()
    agent.client = Client(raise_request_exception=False)
    with caplog.at_level(logging.INFO, logger="poppy_django.views"), database_away():
        answer = agent.post("", agent.message("hello"))
    with caplog.at_level(logging.INFO, logger="poppy_django.views"):
        assert agent.post("", agent.message("hello again")).status_code == 201
    # The requests' streak: told when it began, and when the database answered again.
    told = [r.getMessage() for r in caplog.records if r.name == "poppy_django.views"]
    assert told[0].startswith("poppy: requests reaching database failed: ")
    assert told[-1].startswith("poppy: requests reaching database works again, after ")
    assert answer.status_code == 503 and answer["Retry-After"] == "5"
    assert answer.json()["error"] == "temporarily_unavailable"
    assert answer.json()["error_description"].startswith("The database is unreachable.")


@pytest.mark.django_db
def test_readiness_answers_within_its_setting_when_a_check_hangs(settings) -> None:
    """A hung database check: the probe answers 503 within POPPY["READINESS_ANSWER_SECONDS"]
    (an orchestrator's probe timeout decides it), the check's thread waits it out alone."""
    from django.test import RequestFactory

    from poppy_django.observe.health import Readiness

    settings.POPPY = {**settings.POPPY, "READINESS_ANSWER_SECONDS": 0.2}
    released = threading.Event()
    probe = Readiness.as_view(database=lambda: released.wait(60))
    try:
        answer = probe(RequestFactory().get("/health/ready"))
    finally:
        released.set()
    body = json.loads(answer.content)
    assert answer.status_code == 503
    assert body["checks"]["database"]["error"] == "no answer within 0.2 s"
    assert body["checks"]["migrations"]["error"] == "not reached: a check before hangs"
