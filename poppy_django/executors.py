"""Where turns run: in-process worker threads (embedded default) or Celery workers.

``POPPY["EXECUTOR"]`` names the class; its ``dispatch(conversation_id)`` is called after the
message that needs a turn is committed. Both run :func:`poppy_django.turns.run_turns`, so
the semantics (lease, retries, exactly-once reply) are the same.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from poppy_django.conf import poppy_settings

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
        if pool is not None:
            pool.shutdown(wait=wait)


class CeleryExecutor:
    """Turns in Celery workers (``celery -A yourproject worker``), any number, anywhere."""

    @staticmethod
    def dispatch(conversation_id: str) -> None:
        from poppy_django.tasks import run_turns_task

        run_turns_task.delay(conversation_id)
