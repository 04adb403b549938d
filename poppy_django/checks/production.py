"""Production mode: Celery, its app and broker, Redis fan-out, TLS (E006, E011, W002, W003, W005,
W007, W008)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from poppy_django.checks.poppy_dict import Messages, check_id, poppy_dict_problem
from poppy_django.conf import poppy_settings
from poppy_django.engine.broker_health import (
    CELERY_EXECUTOR,
    THREAD_EXECUTOR,
    celery_app_problem,
    celery_broker_url,
    consequence,
    executor_is,
    redacted,
)
from poppy_django.observe import describe_failure


def _fanout_is_redis() -> bool:
    return bool(getattr(settings, "EVENTSTREAM_REDIS", None))


def production_mode_errors() -> Messages:
    """E006, W005: turns in Celery need a broker, and Redis for wake-ups and deltas."""
    if not executor_is(CELERY_EXECUTOR):
        return []
    errors: Messages = []
    app_problem = celery_app_problem()
    if app_problem is not None:
        problem, fix = app_problem
        errors.append(
            checks.Error(
                f"Turns run in Celery workers, but {problem}, so each reply would wait for a "
                "worker's recovery sweep (LEASE_SECONDS + SWEEP_SECONDS, 'taking up cnv_…, "
                "left without a writer' in the workers' log).",
                hint=fix,
                id=check_id("E011"),
            )
        )
    if not celery_broker_url():
        errors.append(
            checks.Error(
                "Turns run in Celery workers but no Celery broker is configured: every turn "
                "dispatch fails and conversations stay 'working'.",
                hint="Set CELERY_BROKER_URL (e.g. your Redis URL) and load it in your Celery app "
                "with app.config_from_object('django.conf:settings', namespace='CELERY').",
                id=check_id("E006"),
            )
        )
    if not _fanout_is_redis():
        errors.append(
            checks.Warning(
                "Turns run in Celery workers but EVENTSTREAM_REDIS is unset: their wake-ups "
                "and text deltas never reach the web processes, so readers answer only on the "
                "fallback re-read (WAKE_FALLBACK_SECONDS) and streams get no text-delta.",
                hint="Set EVENTSTREAM_REDIS to your Redis connection ({'host': ..., 'port': ...}).",
                id=check_id("W005"),
            )
        )
    return errors


def production_checks() -> Messages:
    """W002, W003, W007: what only matters with DEBUG=False."""
    errors: Messages = []
    if executor_is(THREAD_EXECUTOR):
        errors.append(
            checks.Warning(
                "Turns run in in-process threads with DEBUG=False: one process only.",
                hint=f'Set POPPY["EXECUTOR"] = "{CELERY_EXECUTOR}".',
                id=check_id("W002"),
            )
        )
    if not _fanout_is_redis() and not executor_is(CELERY_EXECUTOR):  # else W005 says it
        errors.append(
            checks.Warning(
                "Wake-ups and text deltas stay in this process (EVENTSTREAM_REDIS is unset) "
                "with DEBUG=False: readers on other processes wait for the fallback re-read.",
                hint="Set EVENTSTREAM_REDIS to your Redis connection.",
                id=check_id("W003"),
            )
        )
    base_url = poppy_settings.raw("BASE_URL")
    if isinstance(base_url, str) and not base_url.startswith("https://"):
        errors.append(
            checks.Warning(
                f'POPPY["BASE_URL"] = {base_url!r} is not https with DEBUG=False: personal '
                "agents refuse plain-http protocol URLs, and DPoP proofs name this URL.",
                hint="Serve the endpoint over TLS and set BASE_URL to its https:// origin.",
                id=check_id("W007"),
            )
        )
    return errors


#: How long ``check --deploy`` waits for the broker to answer.
BROKER_CHECK_TIMEOUT = 2


def check_broker(app_configs: Any = None, **kwargs: Any) -> Messages:
    """W008 (``check --deploy``): this process cannot reach its Celery broker.

    A deploy check because it opens a connection: a wrong ``CELERY_BROKER_URL`` in the web
    process costs no message (the recovery sweep answers them) but makes every turn late.
    """
    if poppy_dict_problem() is not None or not executor_is(CELERY_EXECUTOR):
        return []
    url = celery_broker_url()
    if not url:
        return []  # E006
    from celery import current_app

    try:
        with current_app.connection_for_write(url, connect_timeout=BROKER_CHECK_TIMEOUT) as conn:
            conn.ensure_connection(max_retries=1, timeout=BROKER_CHECK_TIMEOUT)
    except Exception as exc:
        return [
            checks.Warning(
                f"This process cannot reach its Celery broker {redacted(url)} "
                f"({describe_failure(exc)}): every turn dispatch fails, so {consequence()}.",
                hint="Set CELERY_BROKER_URL to the broker the workers use (the same Redis URL), "
                "and check that it is up and reachable from this machine.",
                id=check_id("W008"),
            )
        ]
    return []
