"""Where a reply's time goes, as each process saw it: for ``bench/latency.py``'s turn timeline.

An app for the bench's processes (``bench/ceiling_settings.py`` installs it): with
``POPPY_BENCH_TIMELINE`` set, it appends one line per moment to that file — the wall clock,
the moment, the conversation — from public signals only: Celery's ``after_task_publish`` (the
web process handed the turn to the broker) and ``task_prerun`` (a worker began the task), and
poppy-django's own ``message_received``, ``turn_started`` and ``turn_finished``. Every
process is on one machine, so their wall clocks agree with the client's. Bench-only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from celery.signals import after_task_publish, task_prerun
from django.apps import AppConfig

from poppy_django import signals

#: The Celery task a dispatched turn runs (``poppy_django.tasks``).
TURN_TASK = "poppy_django.run_turns"


def _writer(path: str, moment: str) -> Callable[..., None]:
    """A signal receiver writing ``moment`` for the ``conversation_id`` it is sent."""

    def write(*, conversation_id: str, **kwargs: Any) -> None:
        # One short append per line: O_APPEND keeps lines from several processes whole.
        with open(path, "a") as timeline:
            timeline.write(f"{time.time():.6f} {moment} {conversation_id}\n")

    return write


class TimelineConfig(AppConfig):
    name = "bench"
    label = "bench_timeline"

    def ready(self) -> None:
        path = os.environ.get("POPPY_BENCH_TIMELINE")
        if not path:
            return
        for moment in ("message_received", "turn_started", "turn_finished"):
            getattr(signals, moment).connect(_writer(path, moment), weak=False)
        dispatched, task_started = _writer(path, "dispatched"), _writer(path, "task_started")

        def published(*, headers: dict[str, Any], body: Any, **kwargs: Any) -> None:
            if headers.get("task") == TURN_TASK:
                dispatched(conversation_id=body[0][0])  # protocol 2: (args, kwargs, embed)

        def prerun(*, task: Any, args: tuple[Any, ...], **kwargs: Any) -> None:
            if task.name == TURN_TASK:
                task_started(conversation_id=args[0])

        after_task_publish.connect(published, weak=False)
        task_prerun.connect(prerun, weak=False)
