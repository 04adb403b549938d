"""Whether this process can hand turns to its executor (the Celery broker), in words.

A dispatch that fails costs no message (the message is committed, the conversation stays
``working``, a worker's recovery sweep takes it up), so nothing fails loudly, and a wrong
``CELERY_BROKER_URL`` in the web process would only show as every turn arriving late. This
module makes that degraded state visible: one warning when it starts and one per
``REPORT_INTERVAL`` while it lasts (with the count), one line when it ends, and the state
itself for the desk's banner and the ``poppy_django.W008`` check.

Per process: it is the web process's own broker settings that are wrong.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from django.conf import ENVIRONMENT_VARIABLE, settings
from django.core.exceptions import ImproperlyConfigured

from poppy_django.conf import poppy_settings
from poppy_django.observe import describe_failure

#: The name operators know these lines by (docs/logging.md).
logger = logging.getLogger("poppy_django.turns")

#: Seconds between two warnings while dispatches keep failing.
REPORT_INTERVAL = 60.0


#: The executors' public paths, as ``POPPY["EXECUTOR"]`` names them.
CELERY_EXECUTOR = "poppy_django.executors.CeleryExecutor"
THREAD_EXECUTOR = "poppy_django.executors.ThreadExecutor"


def executor_is(path: str) -> bool:
    """Whether ``POPPY["EXECUTOR"]`` is (a subclass of) the class at ``path``."""
    raw = poppy_settings.raw("EXECUTOR")
    if raw == path:
        return True
    try:
        configured = poppy_settings.EXECUTOR
    except ImproperlyConfigured:
        return False  # E001
    from django.utils.module_loading import import_string

    target = import_string(path)
    return isinstance(configured, type) and issubclass(configured, target)


def celery_broker_url() -> str | None:
    """The broker Celery would use: ``CELERY_BROKER_URL`` (setting or environment), else the
    current Celery app's ``broker_url``."""
    for name in ("CELERY_BROKER_URL", "BROKER_URL"):
        value = getattr(settings, name, None)
        if value:
            return str(value)
    try:
        from celery import current_app

        url = current_app.conf.broker_url
    except Exception:  # no Celery app configured in this process
        return None
    return str(url) if url else None


def celery_app_problem() -> tuple[str, str] | None:
    """Why turns dispatched from this process would not reach the project's workers, and
    the fix: the Celery app they go through is not the project's (or ignores its settings).
    None when it is.

    Celery's Django set-up imports the project's app when Django starts (``from .celery
    import app as celery_app`` in the project's ``__init__.py``). Without it, ``celery -A
    mysite worker`` still runs, but this process dispatches through Celery's fallback app
    (named ``default``, without the Django fix-up), whose broker is Celery's built-in
    default: no worker reads it, and each turn waits for a recovery sweep.
    """
    from celery import current_app as app

    configured = getattr(settings, "CELERY_BROKER_URL", None)
    # The fallback app's fix-ups are none (celery-types does not declare the attribute).
    if app.main == "default" and not app.fixups:  # type: ignore[attr-defined]
        return (
            "this process dispatches them through Celery's fallback app (broker "
            f"{app.connection_for_write().as_uri()}), not your project's Celery app, which was "
            "never imported: no worker receives them",
            f"Import your Celery app when Django starts: in {_project_package()}/__init__.py, "
            "'from .celery import app as celery_app' (Celery's First steps with Django).",
        )
    if configured and app.conf.broker_url != configured:
        return (
            f"the Celery app {app.main!r} dispatches them to {redacted(app.conf.broker_url)}, "
            f"not to CELERY_BROKER_URL {redacted(str(configured))}: it ignores Django's settings",
            "Load them in your Celery app: "
            "app.config_from_object('django.conf:settings', namespace='CELERY').",
        )
    return None


def _project_package() -> str:
    """The project's package as a path (``mysite`` for ``mysite.settings``)."""
    module = os.environ.get(ENVIRONMENT_VARIABLE) or "yourproject.settings"
    return module.rpartition(".")[0].replace(".", "/") or "yourproject"


def redacted(url: str | None) -> str:
    """A broker URL without its credentials: ``redis://:secret@host:6379/0`` → ``redis://host:6379/0``."""
    if not url:
        return "(no broker configured)"
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def broker() -> str:
    """The broker this process dispatches to, credentials removed, or the executor's name."""
    if executor_is(CELERY_EXECUTOR):
        return f"the Celery broker {redacted(celery_broker_url())}"
    return f"the executor {poppy_settings.raw('EXECUTOR')}"


def consequence() -> str:
    """What a failed dispatch means for the conversation, with this deployment's figures."""
    lease = poppy_settings.LEASE_SECONDS
    sweep = poppy_settings.SWEEP_SECONDS
    if sweep is None:
        return (
            "the message is kept, but its turn waits for the poppy_reap task or command "
            "(SWEEP_SECONDS is None); check CELERY_BROKER_URL in this process's settings"
        )
    return (
        f"the message is kept and a worker's recovery sweep answers it, up to "
        f"{lease + sweep:g} s late (LEASE_SECONDS + SWEEP_SECONDS) while this lasts; "
        "check CELERY_BROKER_URL in this process's settings and that the broker is up"
    )


@dataclass(frozen=True)
class Problem:
    """A degraded dispatch, as the desk shows it."""

    broker: str
    since: float
    failures: int
    kind: str
    consequence: str


class BrokerHealth:
    """Failed and successful dispatches of this process, reported once per interval."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: float | None = None
        self._failures = 0
        self._unreported = 0
        self._reported_at = 0.0
        self._kind = ""

    def failed(self, conversation_id: str, exc: BaseException) -> None:
        now = time.time()
        with self._lock:
            first = self._since is None
            if first:
                self._since = now
            self._failures += 1
            self._unreported += 1
            self._kind = describe_failure(exc)
            due = first or now - self._reported_at >= REPORT_INTERVAL
            if not due:
                return
            count, self._unreported, self._reported_at = self._unreported, 0, now
        logger.warning(
            "poppy: could not hand %s to %s (%s): %s.%s",
            conversation_id,
            broker(),
            self._kind,
            consequence(),
            "" if first else f" {count} dispatches failed since the last report.",
            extra={"poppy": {"moment": "dispatch_failed", "conversation_id": conversation_id}},
        )

    def succeeded(self) -> None:
        with self._lock:
            if self._since is None:
                return
            lasted, failures = time.time() - self._since, self._failures
            self._since, self._failures, self._unreported, self._kind = None, 0, 0, ""
        logger.warning(
            "poppy: dispatching to %s works again after %.0f s and %d failed dispatches",
            broker(),
            lasted,
            failures,
        )

    def problem(self) -> Problem | None:
        """The degraded state, if dispatches are failing now."""
        with self._lock:
            if self._since is None:
                return None
            return Problem(broker(), self._since, self._failures, self._kind, consequence())


#: This process's record.
health = BrokerHealth()
