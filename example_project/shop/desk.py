"""Acme's handoff hooks: a request queues the conversation on the support desk."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def request_handoff(*, conversation_id: str, initiator: str) -> str:
    """Every request waits on the desk's queue until a person joins (or says no)."""
    logger.info("desk: %s asked for a person (%s)", conversation_id, initiator)
    return "queued"


def forward_message(*, conversation_id: str, message: dict[str, Any]) -> None:
    """The desk reads transcripts live, so a forwarded message needs no extra delivery."""
    logger.info("desk: new message %s in %s", message.get("id"), conversation_id)


def cancel_handoff(*, conversation_id: str) -> None:
    logger.info("desk: handoff of %s cancelled (closed)", conversation_id)
