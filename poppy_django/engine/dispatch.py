"""Handing a conversation that needs a turn to the configured executor, after commit.

Its own module so that what records messages (conversations, the service API, staff
approvals) depends only on the setting, not on the executors or the turn machinery.
"""

from __future__ import annotations

from django.db import transaction

from poppy_django.conf import poppy_settings
from poppy_django.engine.broker_health import health
from poppy_django.observe import metrics, tracing


def executor_is_inline() -> bool:
    """Whether turns are answered when a test asks, on the test's thread: the test kit's
    ``InlineExecutor`` (``inline = True``)."""
    return getattr(poppy_settings.EXECUTOR, "inline", False) is True


def dispatch_on_commit(conversation_id: str) -> None:
    """Hand the conversation to the configured executor once the transaction commits.

    The test kit's inline executor is handed it at once: it only notes the conversation,
    which the test answers when it asks, inside the test's own transaction (a ``TestCase``'s
    never commits, and in an ``async def`` test Django captures no on-commit callback).
    """

    def dispatch() -> None:
        try:
            with tracing.span("poppy.dispatch", conversation_id=conversation_id):
                poppy_settings.EXECUTOR.dispatch(conversation_id)
        except Exception as exc:
            metrics.dispatch_failures.add(1)
            # The message is committed and the conversation is ``working``: the workers'
            # recovery sweep takes it up, so the acknowledgement stands. Said once per
            # interval, naming the broker and what it costs (broker_health).
            health.failed(conversation_id, exc)
        else:
            health.succeeded()

    if executor_is_inline():
        dispatch()
    else:
        transaction.on_commit(dispatch)
