"""One structured log line and one signal for each moment that matters.

Log records go to the ``poppy_django`` logger with ``extra={"poppy": {...}}`` (the moment,
conversation, turn and request ids) so a JSON formatter can index them; signals reach
integrators once the moment is durable (after the surrounding transaction commits).
Message contents are passed to signals only, never logged.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import Signal

from poppy_django.observe import metrics, tracing
from poppy_django.observe.request_id import request_id

logger = logging.getLogger("poppy_django")


def moment(
    name: str,
    signal: Signal | None,
    *,
    level: int = logging.INFO,
    private: dict[str, Any] | None = None,
    at_once: bool = False,
    **fields: Any,
) -> None:
    """Log ``name`` with its fields and send ``signal`` (with ``private`` too) on commit.

    Both wait for the surrounding transaction: a moment rolled back (a duplicate start
    refused by a constraint) never happened, so it is neither logged nor signalled. Outside
    a transaction both happen at once. ``at_once``: now, without asking the database (Django
    connects to tell whether a transaction is open): a moment the database could not keep,
    such as a turn that failed while it was out of reach.
    """
    logged = {"moment": name, **fields}
    if (current := request_id.get()) is not None:
        logged["request_id"] = current
    if (ids := tracing.current_ids()) is not None:
        logged["trace_id"] = ids[0]
    arguments = {**fields, **(private or {})}

    def record() -> None:
        logger.log(
            level,
            "poppy %s %s",
            name,
            " ".join(
                f"{key}={value}"
                for key, value in logged.items()
                if key != "moment" and value is not None
            ),
            extra={"poppy": logged},
        )
        metrics.on_moment(name, fields)
        tracing.event(name, **logged)
        if signal is None:
            return
        from poppy_django.models import Conversation  # the signals' sender

        for receiver, result in signal.send_robust(sender=Conversation, **arguments):
            if isinstance(result, Exception):
                logger.error("poppy signal receiver %r failed", receiver, exc_info=result)

    if at_once:
        record()
    else:
        transaction.on_commit(record)
