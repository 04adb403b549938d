"""Handing a conversation that needs a turn to the configured executor, after commit.

Its own module so that what records messages (conversations, the service API, staff
approvals) depends only on the setting, not on the executors or the turn machinery.

An executor whose dispatch waits on a broker (``waits_on_broker = True``: Celery's) is
dispatched after the answer, by this process's :mod:`~poppy_django.engine.handover` thread:
the commit already makes the message durable, and a lost dispatch is answered by the
recovery sweep. Any other is dispatched at the commit, on the committing thread.
"""

from __future__ import annotations

from django.db import transaction

from poppy_django.conf import poppy_settings
from poppy_django.engine.broker_health import health
from poppy_django.engine.handover import Handover
from poppy_django.observe import metrics, tracing


def executor_is_inline() -> bool:
    """Whether turns are answered when a test asks, on the test's thread: the test kit's
    ``InlineExecutor`` (``inline = True``)."""
    return getattr(poppy_settings.EXECUTOR, "inline", False) is True


def dispatch_now(conversation_id: str) -> BaseException | None:
    """Hand the conversation to the executor, recording the outcome; the error, if it failed.

    A failure costs no message: it is committed and the conversation is ``working``, so the
    workers' recovery sweep takes it up and the acknowledgement stands. It is said once per
    interval, naming the broker and what it costs (broker_health).
    """
    try:
        with tracing.span("poppy.dispatch", conversation_id=conversation_id):
            poppy_settings.EXECUTOR.dispatch(conversation_id)
    except Exception as exc:
        failed(conversation_id, exc)
        return exc
    health.succeeded()
    return None


def failed(conversation_id: str, exc: BaseException) -> None:
    """Record a dispatch that failed (or was not tried: the broker failed the one before)."""
    metrics.dispatch_failures.add(1)
    health.failed(conversation_id, exc)


#: This process's dispatches made after the answer.
after_answer = Handover(dispatch_now, failed)


def dispatch_on_commit(conversation_id: str) -> None:
    """Hand the conversation to the configured executor once the transaction commits.

    The test kit's inline executor is handed it at once: it only notes the conversation,
    which the test answers when it asks, inside the test's own transaction (a ``TestCase``'s
    never commits, and in an ``async def`` test Django captures no on-commit callback).
    """
    if executor_is_inline():
        dispatch_now(conversation_id)
    elif getattr(poppy_settings.EXECUTOR, "waits_on_broker", False) is True:
        transaction.on_commit(lambda: after_answer.submit(conversation_id))
    else:
        transaction.on_commit(lambda: dispatch_now(conversation_id))


def flush(timeout: float) -> bool:
    """Wait until the dispatches made after the answer so far are made; False at timeout
    (a test that looks at what its request's dispatch did; the process's exit drains them
    by itself)."""
    return after_answer.flush(timeout)
