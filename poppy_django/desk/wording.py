"""The desk's and the admin's words for a conversation: one vocabulary for both.

A conversation's wire status (``idle`` while a person holds it, ``queued`` while it waits
for one) is precise for a personal agent and misleading for staff; these are the words staff
read everywhere: the queue, a conversation's page and the admin's Conversation list.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Exists, OuterRef
from django.utils import formats, timezone

from poppy_django.desk import customers
from poppy_django.models import Conversation, Responder, Status
from poppy_django.store import lifecycle

WAITING = "waiting for a person"
WITH_PERSON = "with a person"
AGENT_WORKING = "agent working"
AGENT_IDLE = "agent idle"
CLOSED = "closed"
#: Shown beside "agent working" when no worker has taken the turn up (see :func:`stalled`).
NO_WORKER = "no worker has taken it up"
#: How many characters of the last message a row shows.
FIRST_WORDS = 60


def status_label(status: str, responder: str) -> str:
    """What the conversation is doing, in staff's words."""
    if status == Status.CLOSED:
        return CLOSED
    if status == Status.QUEUED:
        return WAITING
    if responder == Responder.HUMAN:
        return WITH_PERSON
    return AGENT_WORKING if status == Status.WORKING else AGENT_IDLE


def why(conversation: Conversation) -> str:
    """Why a person is needed, while one is (waiting, or with them): the customer asked, or
    the Company Agent handed it off (with its reason when it gave one)."""
    if not lifecycle.HANDED_TO_PEOPLE(conversation):
        return ""
    if conversation.handoff_initiator == "personal_agent":
        return "The customer asked for a person"
    if conversation.handoff_initiator == "company_agent":
        reason = conversation.handoff_reason.strip()
        return f"Company Agent: {reason}" if reason else "The Company Agent handed it off"
    return ""


def who(conversation: Conversation) -> str:
    """Whom the conversation is with: the customer's name where it is known
    (:func:`poppy_django.desk.customers.name`), else the signed-in account, else the
    pairwise User id."""
    known = customers.name(conversation)
    if known:
        return known
    if conversation.account_id:
        return f"account {conversation.account_id}"
    user_id = conversation.user_id
    return f"user {user_id[:12]}…" if len(user_id) > 13 else f"user {user_id}"


def first_words(text: object, limit: int = FIRST_WORDS) -> str:
    """The start of a message, cut at a word boundary."""
    if not isinstance(text, str):
        return ""
    words = " ".join(text.split())
    if len(words) <= limit:
        return words
    cut = words[:limit].rsplit(" ", 1)[0] or words[:limit]
    return cut + "…"


def stalled_annotation() -> Exists:
    """Whether the row's conversation needs a worker and has had none for ``LEASE_SECONDS``.

    The workers' heartbeats are their leases (renewed while a turn runs); a conversation
    ``working`` with no live lease that long was never taken up, or its worker died and no
    other took over: either way no worker is running turns (or none reaches the database).
    """
    return Exists(Conversation.objects.filter(lifecycle.orphans(), pk=OuterRef("pk")))


def stalled_count() -> int:
    """How many conversations wait for a worker none has taken them up (the sweep's query)."""
    return Conversation.objects.filter(lifecycle.orphans()).count()


def stalled(conversation_id: str) -> bool:
    """:func:`stalled_annotation` for one conversation."""
    return Conversation.objects.filter(lifecycle.orphans(), pk=conversation_id).exists()


def when(moment: datetime | None) -> str:
    """A time as the admin formats its dates (``DATETIME_FORMAT``, the current time zone)."""
    if moment is None:
        return ""
    return str(formats.date_format(timezone.localtime(moment), "DATETIME_FORMAT"))
