"""Nothing a User said is ever logged — on database errors and failed turns included.

A CHECK constraint made for the test refuses rows holding a marker, so PostgreSQL raises an
IntegrityError whose ``DETAIL: Failing row contains (...)`` copies the row, the User's text
with it. Every log record of the run (every logger, DEBUG and up) is then searched for the
marker; the failure itself must still be logged, with what a developer needs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection
from django.test import Client

from poppy_django.engine.executors import ThreadExecutor
from poppy_django.models import Event
from poppy_django.tasks import run_turns_task
from tests.agents import PersonalAgent
from tests.turn_control import dispatch_lost

#: What the User said: a card number, as in the review.
SECRET = "card 4111-1111-1111-1111"
MARKER = "4111-1111"
CONSTRAINT = "poppy_test_no_card_numbers"


class Records:
    """Every record logged during the test (any logger, DEBUG and up)."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self.caplog = caplog

    def __iter__(self) -> Iterator[logging.LogRecord]:
        return iter(self.caplog.records)


@pytest.fixture
def records(caplog: pytest.LogCaptureFixture) -> Records:
    caplog.set_level(logging.DEBUG)
    for name in ("poppy_django", "django", "celery"):
        caplog.set_level(logging.DEBUG, logger=name)
    return Records(caplog)


@contextmanager
def rows_refused(condition: str) -> Iterator[None]:
    """Events matching ``condition`` cannot be written (committed: the views and the turns
    use connections of their own)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"ALTER TABLE poppy_django_event ADD CONSTRAINT {CONSTRAINT} CHECK ({condition})"
        )
    try:
        yield
    finally:
        ThreadExecutor.shutdown(wait=True)
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE poppy_django_event DROP CONSTRAINT {CONSTRAINT}")


@pytest.fixture
def user_rows_refused(transactional_db: None) -> Iterator[None]:
    """A message quoting the marker cannot be recorded."""
    with rows_refused(f"payload::text NOT LIKE '%{MARKER}%'"):
        yield


@pytest.fixture
def company_rows_refused(transactional_db: None) -> Iterator[None]:
    """A company message quoting the marker cannot be written (the echo of the User's)."""
    with rows_refused(f"NOT (role = 'company' AND payload::text LIKE '%{MARKER}%')"):
        yield


def everything_logged(records: Records) -> str:
    """Each record as any handler could write it: formatted, with every attribute."""
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return "\n".join(f"{formatter.format(r)}\n{r.__dict__!r}" for r in records)


def assert_logged_without_the_text(records: Records, *expected: str) -> str:
    logged = everything_logged(records)
    assert MARKER not in logged
    for fact in expected:
        assert fact in logged, f"{fact!r} missing from the logs:\n{logged}"
    return logged


def test_a_database_error_while_recording_a_message(user_rows_refused, records) -> None:
    events = Event.objects.count()
    agent = PersonalAgent()
    agent.client = Client(raise_request_exception=False)  # it re-raises what is reported
    response = agent.start(f"Please use my {SECRET}")
    assert response.status_code == 500
    assert response.json() == {"error": "server_error"}
    assert Event.objects.count() == events
    # The failure is logged with its type, SQLSTATE and constraint, and its traceback.
    logged = assert_logged_without_the_text(
        records, "IntegrityError", "SQLSTATE 23514", CONSTRAINT, "Traceback"
    )
    assert "message withheld" in logged


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("text", [f"{SECRET}\u0000", f"{SECRET}\ud800"])
def test_text_postgresql_cannot_store_is_not_logged(records, text) -> None:
    response = PersonalAgent().start(text)
    assert response.status_code in (400, 500)  # 400 once the wire refuses it (issue 12.4)
    assert_logged_without_the_text(records)


def test_a_turn_whose_reply_cannot_be_written(company_rows_refused, records) -> None:
    agent = PersonalAgent()
    response = agent.start(f"My {SECRET}")
    assert response.status_code == 201
    ThreadExecutor.shutdown(wait=True)  # the turn ran (and failed) on the executor
    # The turn failed at its commit: logged with the error's type, never the row's text.
    assert_logged_without_the_text(
        records, "IntegrityError", CONSTRAINT, "poppy: turn ", "Traceback"
    )


def test_a_failed_celery_task(transactional_db, records, monkeypatch) -> None:
    """A task failing outside a turn (the database gone, say) with the User's words in its
    exception: Celery's own tracer logs it, and the words are withheld."""
    agent = PersonalAgent()
    with dispatch_lost():
        conversation_id = agent.start(f"My {SECRET}").json()["conversation_id"]

    def fails(engine: object, conversation_id: str, owner: str | None = None) -> None:
        raise RuntimeError(f"could not answer My {SECRET}")

    # The task hands the conversation to its process's engine, which fails here.
    monkeypatch.setattr("poppy_django.engine.loop.Engine.submit", fails)
    result = run_turns_task.apply(args=[conversation_id])  # Celery's own tracer and logging
    assert result.failed()
    assert any(r.name == "celery.app.trace" and r.levelno >= logging.ERROR for r in records)
    assert_logged_without_the_text(records, "poppy_django.run_turns", "RuntimeError")


def test_a_failed_turn_logs_its_error_without_its_message(transactional_db, records) -> None:
    agent = PersonalAgent()
    conversation_id = agent.start(f"#fail {SECRET}").json()["conversation_id"]
    agent.settled(conversation_id)
    failed = [r for r in records if getattr(r, "poppy", {}).get("moment") == "turn_failed"]
    assert len(failed) == 1
    assert failed[0].poppy["error"].endswith("(message withheld)")
    assert_logged_without_the_text(records, "turn_failed")


def test_every_logger_of_the_package_withholds_user_text() -> None:
    """Each logger the package's modules create (by module or by topic) carries the filter.

    A logger without it would log an exception's message, which may quote a User."""
    import importlib
    import pkgutil

    import poppy_django
    from poppy_django.observe import WithholdUserText, withhold_user_text_in_logs

    for module in pkgutil.walk_packages(poppy_django.__path__, "poppy_django."):
        if ".migrations" not in module.name:
            importlib.import_module(module.name)
    withhold_user_text_in_logs()
    uncovered = [
        name
        for name, logger in logging.Logger.manager.loggerDict.items()
        if name.startswith("poppy_django")
        and isinstance(logger, logging.Logger)
        and not any(isinstance(f, WithholdUserText) for f in logger.filters)
    ]
    assert uncovered == []
