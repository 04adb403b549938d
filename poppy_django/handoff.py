"""Handing a conversation to a person: the request hook and the app's other hooks.

Hooks are import strings in ``POPPY["HANDOFF_HOOKS"]`` (``request``, ``message``,
``cancel``) and ``POPPY["DIRECT_HOOKS"]`` (``opened``, ``closed``), called with keyword
arguments. Without a ``request`` key, a project with the admin (and so the desk) queues
every handoff for the desk (:func:`queue_on_desk`); ``"request": None`` turns that off.
Only ``request`` is called inside the transaction (its answer decides the state); the
others run after commit, and their failures are logged, never turned into errors.
"""

from __future__ import annotations

import logging
from typing import Any

from django.apps import apps
from django.db import transaction
from django.utils import timezone

from poppy_django import ids, observe, signals
from poppy_django.conf import hook, poppy_settings
from poppy_django.models import Conversation, Responder, Status
from poppy_django.store import event_log

logger = logging.getLogger(__name__)


def with_person(conversation: Conversation) -> bool:
    """A person has the conversation, or is being found: the agent stays out of it.

    The one home of this rule: the endpoint routes messages by it and :func:`request`
    answers ``already`` by it.
    """
    return conversation.status == Status.QUEUED or conversation.responder == Responder.HUMAN


def queue_on_desk(*, conversation_id: str, initiator: str) -> str:
    """The default request hook where the desk is: wait in its queue until a person joins."""
    return "queued"


def _request_hook() -> Any:
    """The configured request hook; when none is named, the desk's queue if the admin is on."""
    configured = poppy_settings.raw("HANDOFF_HOOKS") or {}
    if "request" not in configured and apps.is_installed("django.contrib.admin"):
        return queue_on_desk
    return hook("HANDOFF_HOOKS", "request")


def request(
    conversation: Conversation, *, initiator: str, meta: dict[str, Any] | None = None
) -> str:
    """Ask the request hook for a person; returns the outcome recorded."""
    if with_person(conversation):
        return "already"
    request_hook = _request_hook()
    texts = poppy_settings.texts
    outcome: Any = None
    if request_hook is not None:
        try:
            with transaction.atomic():  # a failing hook must not poison the transaction
                outcome = request_hook(conversation_id=conversation.id, initiator=initiator)
        except Exception:
            logger.exception("poppy: the handoff request hook failed for %s", conversation.id)
    if outcome == "queued":
        conversation.handoff_requested_at = timezone.now()
        conversation.save(update_fields=["handoff_requested_at", "updated_at"])
        event_log.set_state(
            conversation, status=Status.QUEUED, responder=Responder.AGENT, meta=meta
        )
        recorded = "queued"
    elif outcome == "joined":
        event_log.set_state(conversation, status=Status.IDLE, responder=Responder.HUMAN, meta=meta)
        recorded = "joined"
    elif isinstance(outcome, dict) and "unavailable" in outcome:
        event_log.set_state(
            conversation, status=Status.QUEUED, responder=Responder.AGENT, meta=meta
        )
        unavailable(conversation, str(outcome["unavailable"]), meta=meta)
        recorded = "unavailable"
    else:
        if request_hook is not None and outcome is not None:
            logger.error("poppy: the handoff request hook answered %r", outcome)
        event_log.append_company_message(
            conversation,
            message_id=ids.new_company_message_id(),
            text=texts["no_one_available"],
            meta=meta,
        )
        recorded = "no_hook"
    observe.moment(
        "handoff_requested",
        signals.handoff_requested,
        conversation_id=conversation.id,
        initiator=initiator,
        outcome=recorded,
    )
    return recorded


def unavailable(
    conversation: Conversation, reason: str, *, meta: dict[str, Any] | None = None
) -> None:
    """A queued handoff that no one can take: say why, and give it back to the agent."""
    event_log.append_company_message(
        conversation,
        message_id=ids.new_company_message_id(),
        text=poppy_settings.texts["handoff_unavailable"].format(reason=reason),
        meta=meta,
    )
    conversation.handoff_requested_at = None
    conversation.save(update_fields=["handoff_requested_at", "updated_at"])
    event_log.set_state(conversation, status=Status.IDLE, responder=Responder.AGENT, meta=meta)


def _call_after_commit(group: str, name: str, **kwargs: Any) -> None:
    function = hook(group, name)
    if function is None:
        return

    def call() -> None:
        try:
            function(**kwargs)
        except Exception:
            logger.exception("poppy: the %s %s hook failed", group, name)

    transaction.on_commit(call)


def forward_message_on_commit(conversation_id: str, message: dict[str, Any]) -> None:
    _call_after_commit("HANDOFF_HOOKS", "message", conversation_id=conversation_id, message=message)


def cancel_on_commit(conversation_id: str) -> None:
    _call_after_commit("HANDOFF_HOOKS", "cancel", conversation_id=conversation_id)


def direct_hook_on_commit(name: str, conversation_id: str, parent_id: str) -> None:
    _call_after_commit("DIRECT_HOOKS", name, conversation_id=conversation_id, parent_id=parent_id)
