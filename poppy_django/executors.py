"""Where turns run: in-process worker threads (embedded default) or Celery workers.

``POPPY["EXECUTOR"]`` names the class; its ``dispatch(conversation_id)`` is called after the
message that needs a turn is committed. Both run :func:`poppy_django.turns.run_turns`, so
the semantics (lease, retries, exactly-once reply) are the same, and both recover turns
whose writer died with no extra process: Celery workers start their recovery sweep when
ready (:mod:`poppy_django.tasks`); the embedded executor's process starts it with its pool
or at its first request after a restart (:func:`recover_on_request`).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from poppy_django.conf import poppy_settings
from poppy_django.recovery import sweeper

logger = logging.getLogger(__name__)


class ThreadExecutor:
    """Turns on a small pool of threads in this process: no broker, one process only."""

    _pool: ThreadPoolExecutor | None = None
    _lock = threading.Lock()

    @classmethod
    def pool(cls) -> ThreadPoolExecutor:
        with cls._lock:
            if cls._pool is None:
                cls._pool = ThreadPoolExecutor(
                    max_workers=poppy_settings.EXECUTOR_THREADS, thread_name_prefix="poppy-turn"
                )
                sweeper.start()
            return cls._pool

    @classmethod
    def dispatch(cls, conversation_id: str) -> None:
        cls.pool().submit(cls._run, conversation_id)

    @staticmethod
    def _run(conversation_id: str) -> None:
        from django.db import connection

        from poppy_django.turns import run_turns

        try:
            run_turns(conversation_id)
        except Exception:
            logger.exception("poppy: turns of %s failed", conversation_id)
        finally:
            connection.close()

    @classmethod
    def shutdown(cls, wait: bool = True) -> None:
        """Finish the turns in flight (tests and graceful shutdown)."""
        with cls._lock:
            pool, cls._pool = cls._pool, None
        sweeper.stop(wait=wait)
        if pool is not None:
            pool.shutdown(wait=wait)


def recover_on_request(**kwargs: Any) -> None:
    """``request_started`` receiver: a restarted embedded process recovers at once.

    (Only with the in-process executor: with Celery, the workers recover.)
    """
    if poppy_settings.EXECUTOR is ThreadExecutor:
        ThreadExecutor.pool()


class CeleryExecutor:
    """Turns in Celery workers (``celery -A yourproject worker``), any number, anywhere."""

    @staticmethod
    def dispatch(conversation_id: str) -> None:
        from poppy_django.tasks import run_turns_task

        # One try, no publish retries (Celery's default retries took 1.7 s of the request
        # with the broker down): a dispatch that fails costs nothing, the sweep answers it.
        run_turns_task.apply_async((conversation_id,), retry=False)
