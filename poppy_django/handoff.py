"""Handing a conversation to a person: the request hook and the app's other hooks.

Hooks are import strings in ``POPPY["HANDOFF_HOOKS"]`` (``request``, ``assign``,
``message``, ``cancel``) and ``POPPY["DIRECT_HOOKS"]`` (``opened``, ``closed``), called with
keyword arguments. Without a ``request`` key, a project with the admin (and so the desk)
queues a handoff for the desk when someone is there to take it (:func:`queue_on_desk`);
``"request": None`` turns that off. Without an ``assign`` key, a queued handoff goes to the
least loaded available staff member with room for it, in its team
(:func:`poppy_django.staff.routing.least_loaded`); ``"assign": None`` leaves it unassigned,
for whoever joins first. ``request`` and ``assign`` are called inside
the transaction (their answers decide the state); the others run after commit, and their
failures are logged, never turned into errors.

A queued handoff no one joins within ``POPPY["HANDOFF_MAX_WAIT_SECONDS"]`` goes back to the
Company Agent (:func:`return_overdue`, run by every worker's sweep).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

from django.apps import apps
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from poppy_django import ids, observe, signals
from poppy_django.conf import hook, poppy_settings
from poppy_django.engine import dispatch
from poppy_django.models import Conversation, HandoffOutcome
from poppy_django.staff import handoffs, office_hours, presence, routing
from poppy_django.store import event_log, lifecycle

logger = logging.getLogger(__name__)


class RequestHook(Protocol):
    """``HANDOFF_HOOKS["request"]``, inside the transaction: ``"queued"``, ``"joined"`` or
    ``{"unavailable": reason}`` (anything else, or an exception: no one is available)."""

    def __call__(self, *, conversation_id: str, initiator: str) -> str | dict[str, str] | None: ...


class AssignHook(Protocol):
    """``HANDOFF_HOOKS["assign"]``, inside the transaction: one of ``candidates`` (the
    usernames who may take it now: :func:`poppy_django.staff.routing.candidates`), or None:
    unassigned."""

    def __call__(self, *, conversation_id: str, candidates: list[str]) -> str | None: ...


class MessageHook(Protocol):
    """``HANDOFF_HOOKS["message"]``, after commit: a personal agent's message while the
    conversation is queued or with a person."""

    def __call__(self, *, conversation_id: str, message: dict[str, Any]) -> object: ...


class CancelHook(Protocol):
    """``HANDOFF_HOOKS["cancel"]``, after commit: a queued conversation was closed."""

    def __call__(self, *, conversation_id: str) -> object: ...


class DirectHook(Protocol):
    """``DIRECT_HOOKS["opened"]`` and ``["closed"]``, after commit: a Direct Conversation of
    ``parent_id`` opened or closed."""

    def __call__(self, *, conversation_id: str, parent_id: str) -> object: ...


def queue_on_desk(*, conversation_id: str, initiator: str) -> str | dict[str, str]:
    """The default request hook where the desk is: wait in its queue until a person joins,
    when someone is there to join. Outside office hours, or with no staff member available,
    ``unavailable`` with the reason (``TEXTS["outside_office_hours"]``,
    ``TEXTS["no_staff_available"]``), which the personal agent is told."""
    texts = poppy_settings.texts
    hours = office_hours.configured()
    if hours is not None and not hours.open_at(timezone.now()):
        return {"unavailable": texts["outside_office_hours"].format(hours=hours.description)}
    if not presence.available():
        return {"unavailable": texts["no_staff_available"]}
    return "queued"


def _assign_hook() -> AssignHook | None:
    configured = poppy_settings.raw("HANDOFF_HOOKS") or {}
    if "assign" not in configured:
        return routing.least_loaded
    assign: AssignHook | None = hook("HANDOFF_HOOKS", "assign")
    return assign


def _assign(conversation: Conversation) -> str:
    """Whom the assign hook gives a queued handoff to ("" for no one): one of the candidates
    (available, in the rotation, with room, in its team: :mod:`poppy_django.staff.routing`),
    or no one (a failing hook, or an answer that is not one of them, is logged)."""
    return assign_among(conversation, routing.candidates(conversation.team))


def assign_among(conversation: Conversation, candidates: list[str]) -> str:
    """The assign hook's choice for ``conversation`` among ``candidates`` ("" for no one)."""
    assign_hook = _assign_hook()
    if assign_hook is None or not candidates:
        return ""
    try:
        with transaction.atomic():
            chosen = assign_hook(conversation_id=conversation.id, candidates=candidates)
    except Exception:
        logger.exception("poppy: the handoff assign hook failed for %s", conversation.id)
        return ""
    if chosen in (None, ""):
        return ""
    if chosen not in candidates:
        logger.error("poppy: the handoff assign hook chose %r, who is not available", chosen)
        return ""
    return str(chosen)


def _request_hook() -> RequestHook | None:
    """The configured request hook; when none is named, the desk's queue if the admin is on."""
    configured = poppy_settings.raw("HANDOFF_HOOKS") or {}
    if "request" not in configured and apps.is_installed("django.contrib.admin"):
        return queue_on_desk
    request_hook: RequestHook | None = hook("HANDOFF_HOOKS", "request")
    return request_hook


def request(
    conversation: Conversation,
    *,
    initiator: str,
    reason: str = "",
    meta: dict[str, Any] | None = None,
) -> str:
    """Ask the request hook for a person; returns the outcome recorded. ``reason``: why the
    Company Agent hands off (shown to staff, never on the wire)."""
    if lifecycle.WITH_PEOPLE(conversation):
        return "already"
    lifecycle.handoff_asked(conversation, initiator=initiator, reason=reason)
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
        lifecycle.queue_for_person(conversation, assignee=_assign(conversation), meta=meta)
        handoffs.requested(conversation, initiator=initiator, outcome=HandoffOutcome.WAITING)
        recorded = "queued"
        observe.moment(
            "handoff_waiting",
            signals.handoff_waiting,
            conversation_id=conversation.id,
            initiator=initiator,
            assignee=conversation.assignee,
            private={"reason": reason},
        )
    elif outcome == "joined":
        lifecycle.person_joins(conversation, holder=None, meta=meta)
        handoffs.requested(conversation, initiator=initiator, outcome=HandoffOutcome.JOINED)
        recorded = "joined"
    elif isinstance(outcome, dict) and "unavailable" in outcome:
        # The personal agent sees the handoff queued, then declined for this reason.
        lifecycle.queue_for_person(conversation, assignee="", meta=meta)
        reason = str(outcome["unavailable"])
        handoffs.requested(
            conversation, initiator=initiator, outcome=HandoffOutcome.UNAVAILABLE, reason=reason
        )
        unavailable(conversation, reason, meta=meta)
        recorded = "unavailable"
    else:
        if request_hook is not None and outcome is not None:
            logger.error("poppy: the handoff request hook answered %r", outcome)
        handoffs.requested(
            conversation,
            initiator=initiator,
            outcome=HandoffOutcome.UNAVAILABLE,
            reason=texts["no_one_available"],
        )
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
    """A queued handoff that no one can take: say why, and give it back to the agent, which
    answers what the personal agent said while it waited (those messages went to the
    message hook, for a person who never came)."""
    event_log.append_company_message(
        conversation,
        message_id=ids.new_company_message_id(),
        text=poppy_settings.texts["handoff_unavailable"].format(reason=reason),
        meta=meta,
    )
    if lifecycle.handoff_declined(conversation, meta):
        dispatch.dispatch_on_commit(conversation.id)


def overdue() -> Q:
    """Queued handoffs no one joined within ``HANDOFF_MAX_WAIT_SECONDS`` (none without it)."""
    limit = poppy_settings.HANDOFF_MAX_WAIT_SECONDS
    if limit is None:
        return Q(pk__in=[])
    cutoff = timezone.now() - timedelta(seconds=limit)
    return lifecycle.QUEUED.q & Q(handoff_requested_at__lt=cutoff)


def return_overdue() -> list[str]:
    """Give every overdue handoff back to the Company Agent, its reason
    (``TEXTS["handoff_timed_out"]``) told to the personal agent; their ids.

    One conversation a transaction, skipping those another worker's sweep (or a person
    joining) has locked: run by every worker's sweep, each is returned once.
    """
    returned: list[str] = []
    while True:
        with transaction.atomic():
            found = (
                Conversation.objects.select_for_update(skip_locked=True)
                .filter(overdue())
                .exclude(pk__in=returned)
                .order_by("handoff_requested_at")
                .values_list("pk", flat=True)
                .first()
            )
            if found is None:
                return returned
            conversation = event_log.lock(found)
            if lifecycle.QUEUED(conversation):  # re-read under the lock
                handoffs.not_taken(conversation, HandoffOutcome.MISSED, "timed_out")
                unavailable(conversation, poppy_settings.texts["handoff_timed_out"])
                observe.moment(
                    "handoff_timed_out",
                    signals.handoff_timed_out,
                    conversation_id=conversation.id,
                )
            returned.append(found)


def _after_commit(label: str, call: Callable[[], object]) -> None:
    """Run a configured hook's ``call`` after commit; its failure is logged, never raised."""

    def run() -> None:
        try:
            call()
        except Exception:
            logger.exception("poppy: the %s hook failed", label)

    transaction.on_commit(run)


def forward_message_on_commit(conversation_id: str, message: dict[str, Any]) -> None:
    forward: MessageHook | None = hook("HANDOFF_HOOKS", "message")
    if forward is not None:
        _after_commit(
            "HANDOFF_HOOKS message",
            lambda: forward(conversation_id=conversation_id, message=message),
        )


def cancel_on_commit(conversation_id: str) -> None:
    cancel: CancelHook | None = hook("HANDOFF_HOOKS", "cancel")
    if cancel is not None:
        _after_commit("HANDOFF_HOOKS cancel", lambda: cancel(conversation_id=conversation_id))


def direct_hook_on_commit(name: str, conversation_id: str, parent_id: str) -> None:
    told: DirectHook | None = hook("DIRECT_HOOKS", name)
    if told is not None:
        _after_commit(
            f"DIRECT_HOOKS {name}",
            lambda: told(conversation_id=conversation_id, parent_id=parent_id),
        )
