"""Celery's "Task … received" line named with the dispatch's request and trace.

A worker logs that it received a task before the task runs, in the process that consumes
the queue (a prefork pool's parent), so the ids the app restores from ``task_prerun`` to
``task_postrun`` (:mod:`poppy_django.tasks`) come too late for it. :class:`CorrelatedRequest`,
the request class of the app's tasks (their base, :class:`CorrelatedTask`, sets Celery's
``Task.Request``), restores them from the
message's headers as the worker builds its request, which is just before that line is logged,
and lets them go when Celery's ``task_received`` says the line was written: only that line
(and a revoked task's discarding) is told with them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import Task
from celery.signals import task_received
from celery.worker.request import Request

from poppy_django.observe import tracing

#: The ids of the request being received in this process, undone at ``task_received``.
_receiving: Callable[[], None] | None = None


def _let_go() -> None:
    global _receiving
    undo, _receiving = _receiving, None
    if undo is not None:
        undo()


class CorrelatedRequest(Request):
    """A task request whose building restores the dispatch's ids (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        global _receiving
        super().__init__(*args, **kwargs)
        _let_go()  # a revoked task's, never received: not carried onto this one
        _receiving = tracing.restore_ids(self.request_dict)


@task_received.connect
def _received(**kwargs: Any) -> None:
    _let_go()


class CorrelatedTask(Task):
    """The app's tasks' base: each of their requests a :class:`CorrelatedRequest`."""

    Request = f"{__name__}:{CorrelatedRequest.__name__}"  # Celery takes its qualified name
