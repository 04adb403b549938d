"""Handing a conversation that needs a turn to the configured executor, after commit.

Its own module so that what records messages (conversations, the service API, staff
approvals) depends only on the setting, not on the executors or the turn machinery.
"""

from __future__ import annotations

import logging

from django.db import transaction

from poppy_django.conf import poppy_settings

#: The name operators know this warning by (docs/logging.md).
logger = logging.getLogger("poppy_django.turns")


def dispatch_on_commit(conversation_id: str) -> None:
    """Hand the conversation to the configured executor once the transaction commits."""

    def dispatch() -> None:
        try:
            poppy_settings.EXECUTOR.dispatch(conversation_id)
        except Exception:
            # The message is committed and the conversation is ``working``: the workers'
            # recovery sweep takes it up, so the acknowledgement stands.
            logger.warning(
                "poppy: could not dispatch %s; the recovery sweep will",
                conversation_id,
                exc_info=True,
            )

    transaction.on_commit(dispatch)
