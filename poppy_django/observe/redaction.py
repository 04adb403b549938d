"""Nothing a User said reaches a log through an exception.

An exception's message may quote it (PostgreSQL's ``DETAIL: Failing row contains (...)``
and ``CONTEXT: JSON data`` copy the row's text), so :class:`WithholdUserText` logs the app's
failures with their tracebacks (where, and of what type) but without their messages.
"""

from __future__ import annotations

import logging
import traceback
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from poppy_django.addresses import is_endpoint_path
from poppy_django.observe.dependencies import unavailable

#: Loggers outside the package whose records about the app's work can carry an exception
#: raised with a User's text in it: Django's request logger (a view's unexpected exception)
#: and Celery's task tracer (a task that raised).
_FOREIGN_LOGGERS = ("django.request", "celery.app.trace")


def describe_failure(exc: BaseException, *, public: bool = False) -> str:
    """An exception in words that never quote data: its type, and for a database error the
    SQLSTATE and the schema objects involved (table, column, constraint), not its message.

    A connection-level error of the database or Redis keeps its message, the server's or
    driver's words about the connection (:mod:`~poppy_django.observe.dependencies`), unless
    ``public`` (an answer anyone reaching the server reads: hosts, ports and user names stay
    in the log)."""
    name = type(exc).__qualname__
    module = type(exc).__module__
    if module not in ("builtins", "__main__"):
        name = f"{module}.{name}"
    if isinstance(exc, ImproperlyConfigured):  # configuration text, written by developers
        return f"{name}: {exc}"
    found = unavailable(exc)
    if found is not None:
        kind = "" if found.kind == name else found.kind
        if public:
            return f"{name} ({kind}; message withheld)" if kind else f"{name} (message withheld)"
        return f"{name} ({kind}): {found.message}" if kind else f"{name}: {found.message}"
    schema_only = _schema_only_message(exc)
    if schema_only is not None:
        return f"{name}: {schema_only}"
    provider = _provider_facts(exc)
    if provider:
        return f"{name} ({provider}; message withheld)"
    diag = getattr(exc, "diag", None) or getattr(exc.__cause__, "diag", None)
    if diag is not None:
        facts = [
            f"{label} {value}"
            for label, value in (
                # The driver's class names the kind (psycopg.errors.UndefinedTable).
                ("", _driver_kind(exc)),
                ("SQLSTATE", getattr(diag, "sqlstate", None)),
                ("table", getattr(diag, "table_name", None)),
                ("column", getattr(diag, "column_name", None)),
                ("constraint", getattr(diag, "constraint_name", None)),
            )
            if value
        ]
        return f"{name} ({', '.join(fact.strip() for fact in facts)}; message withheld)"
    return f"{name} (message withheld)"


#: SQLite's messages that name only schema objects or the database's own state (never a
#: row's data): "no such table: poppy_django_conversation" is what tells an operator to
#: migrate, so it is kept.
_SQLITE_SCHEMA_MESSAGES = (
    "no such table: ",
    "no such column: ",
    "table ",  # "table x has no column named y"
    "database is locked",
    "unable to open database file",
    "attempt to write a readonly database",
    "disk I/O error",
)


def _schema_only_message(exc: BaseException) -> str | None:
    """An SQLite error's message when it is one of the schema-only kinds, else None."""
    import sqlite3

    original = exc if isinstance(exc, sqlite3.Error) else exc.__cause__
    if not isinstance(original, sqlite3.OperationalError) or len(original.args) != 1:
        return None
    message = str(original.args[0])
    if "\n" in message or len(message) > 200:
        return None
    if message.startswith("table ") and " has no column named " not in message:
        return None
    return message if message.startswith(_SQLITE_SCHEMA_MESSAGES) else None


def _provider_facts(exc: BaseException) -> str:
    """What a model provider's failure says without a User's words: the model, the HTTP
    status and the provider's error code and type (pydantic-ai's ``ModelAPIError`` and
    ``ModelHTTPError`` carry them), from the exception or the ones it was raised from.

    They tell a wrong model name (404, ``model_not_found``) from an outage (5xx), a key
    problem (401) or an API mismatch (404 on the path: ``openai:`` is the Responses API,
    ``openai-chat:`` chat completions); docs/troubleshooting.md says how.
    """
    facts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 5:
        seen.add(id(current))
        for label, attribute in (
            ("model", "model_name"),
            ("HTTP", "status_code"),
            ("provider code", "provider_error_code"),
            ("provider type", "provider_error_type"),
        ):
            value = getattr(current, attribute, None)
            already = any(fact.startswith(f"{label} ") for fact in facts)
            if isinstance(value, str | int) and not isinstance(value, bool) and not already:
                facts.append(f"{label} {str(value)[:100]}")
        current = current.__cause__ or current.__context__
    return ", ".join(facts)


def _driver_kind(exc: BaseException) -> str | None:
    """The database driver's exception class under Django's wrapper, when it is another."""
    cause = exc.__cause__
    if cause is None or getattr(cause, "diag", None) is None:
        return None
    kind = type(cause)
    return f"{kind.__module__}.{kind.__qualname__}"


def withheld_traceback(exc: BaseException) -> str:
    """The traceback Python would print, each exception's message replaced by
    :func:`describe_failure`: frames and types for debugging, no data."""
    parts: list[str] = []
    seen: set[int] = set()

    def add(current: BaseException) -> None:
        seen.add(id(current))
        cause, context = current.__cause__, current.__context__
        if cause is not None and id(cause) not in seen:
            add(cause)
            parts.append(
                "\nThe above exception was the direct cause of the following exception:\n\n"
            )
        elif context is not None and not current.__suppress_context__ and id(context) not in seen:
            add(context)
            parts.append(
                "\nDuring handling of the above exception, another exception occurred:\n\n"
            )
        if current.__traceback__ is not None:
            parts.append("Traceback (most recent call last):\n")
            parts.extend(traceback.format_tb(current.__traceback__))
        parts.append(describe_failure(current) + "\n")

    add(exc)
    return "".join(parts).rstrip("\n")


class WithholdUserText(logging.Filter):
    """Rewrites a record about the app's work so no exception message is logged.

    Installed by the app on its own loggers, and on ``django.request`` (for requests the
    app's views serve) and ``celery.app.trace`` (for the app's tasks). The record keeps its
    traceback as text (``exc_text``) with every message withheld; ``exc_info`` is dropped,
    so no handler can format the original (Django's admin e-mails would also list the
    frames' local variables, the message among them).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "celery.app.trace":
            self._task_failure(record)
        elif record.name == "django.request" and not _about_the_app(record):
            return True
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            record.exc_text = withheld_traceback(exc)
            record.exc_info = None
            fields = getattr(record, "poppy", None)
            # Its kind stays a field of its own: what a log search or an alert keys on.
            record.poppy = {
                **(fields if isinstance(fields, dict) else {}),
                "error": describe_failure(exc),
            }
        return True

    @staticmethod
    def _task_failure(record: logging.LogRecord) -> None:
        """Celery logs a failed task's exception in its message arguments too."""
        context = record.args
        if not isinstance(context, dict) or not str(context.get("name", "")).startswith(
            "poppy_django."
        ):
            return
        if record.exc_info and record.exc_info[1] is not None:
            context["exc"] = describe_failure(record.exc_info[1])
        else:
            context["exc"] = "(withheld)"
        context["traceback"] = "(withheld)"


def _about_the_app(record: logging.LogRecord) -> bool:
    """Whether a ``django.request`` record is about a request the app served."""
    request = getattr(record, "request", None)
    if request is None or not hasattr(request, "path_info"):
        return False
    if is_endpoint_path(request.path_info):
        return True
    match = getattr(request, "resolver_match", None)
    return str(getattr(getattr(match, "func", None), "__module__", "")).startswith("poppy_django.")


#: The package's loggers named by topic rather than by module (docs/logging.md): they kept
#: their names when their modules moved into the layer folders.
TOPIC_LOGGERS = (
    "poppy_django.approvals",
    "poppy_django.auth",
    "poppy_django.database",
    "poppy_django.engine",
    "poppy_django.executors",
    "poppy_django.middleware",
    "poppy_django.recovery",
    "poppy_django.rest_framework",
    "poppy_django.threads",
    "poppy_django.throttling",
    "poppy_django.turns",
    "poppy_django.views",
)


def withhold_user_text_in_logs() -> None:
    """Put :class:`WithholdUserText` on every logger of the package and on the foreign ones.

    A filter on a logger sees only the records logged there (not its children's), so each
    logger gets its own: the modules' (named after them, found on disk) and the topics'.
    """
    package = Path(__file__).resolve().parent.parent
    names = {"poppy_django", *_FOREIGN_LOGGERS, *TOPIC_LOGGERS}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if "migrations" not in parts:
            names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    for name in names:
        target = logging.getLogger(name)
        if not any(isinstance(f, WithholdUserText) for f in target.filters):
            target.addFilter(WithholdUserText())
