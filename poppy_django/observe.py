"""Observability: one structured log line and one signal for each moment that matters.

Log records go to the ``poppy_django`` logger with ``extra={"poppy": {...}}`` (conversation,
turn and request ids) so a JSON formatter can index them; signals reach integrators once the
moment is durable (after the surrounding transaction commits).
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import Signal

from poppy_django.models import Conversation

logger = logging.getLogger("poppy_django")


def moment(name: str, signal: Signal | None, *, level: int = logging.INFO, **fields: Any) -> None:
    """Log ``name`` with its fields now; send ``signal`` once the transaction commits."""
    logger.log(
        level,
        "poppy %s %s",
        name,
        " ".join(f"{key}={value}" for key, value in fields.items() if value is not None),
        extra={"poppy": {"moment": name, **fields}},
    )
    if signal is None:
        return

    def send() -> None:
        for receiver, result in signal.send_robust(sender=Conversation, **fields):
            if isinstance(result, Exception):
                logger.error("poppy signal receiver %r failed", receiver, exc_info=result)

    transaction.on_commit(send)
