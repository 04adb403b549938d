"""The personal agent's side: what the conversation endpoint does for it (start, message,
hand off, close). The company's side, for the desk and your own code, is
:mod:`poppy_django.service`.

Each operation runs in one transaction under the conversation's row lock: the events, the
receipt and the state change are recorded together, and a turn is dispatched only once they
are committed. Ownership is checked on every call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, models, transaction

from poppy_django import handoff, ids, observe, signals
from poppy_django.agent.registry import agent_for
from poppy_django.conf import poppy_settings
from poppy_django.engine import dispatch
from poppy_django.errors import PoppyError
from poppy_django.models import (
    Conversation,
    EventType,
    MessageReceipt,
    Status,
)
from poppy_django.observe import tracing
from poppy_django.staff import csat, handoffs, waiting
from poppy_django.store import event_log, lifecycle
from poppy_django.store.ownership import OWNER_FIELDS, check_owner, get_owned
from poppy_django.store.wire import InboundMessage
from poppy_django.verifier import Principal


@dataclass(frozen=True)
class Answer:
    """What a POST answers: its status code and ``{conversation_id, status, responder}``."""

    status_code: int
    body: dict[str, Any]

    @property
    def conversation_id(self) -> str:
        return str(self.body["conversation_id"])


def answer_of(conversation: Conversation, status_code: int) -> Answer:
    return Answer(
        status_code,
        {
            "conversation_id": conversation.id,
            "status": conversation.status,
            "responder": conversation.responder,
        },
    )


def _bind_account(principal: Principal, conversation: Conversation) -> None:
    if principal.signed_in and conversation.account_id is None:
        conversation.account_id = principal.account_id
        event_log.save(conversation, "account_id")


def open_direct(conversation: Conversation) -> Conversation | None:
    """The open Direct Conversation of a locked conversation (no query if it never had one)."""
    if not conversation.opened_direct:
        return None
    # Unordered: at most one is open, and the model's ordering would add a sort.
    return conversation.direct_conversations.exclude(status=Status.CLOSED).order_by().first()


def _check_accepts_messages(conversation: Conversation) -> None:
    if conversation.status == Status.CLOSED:
        raise PoppyError("conversation_closed", "The conversation is closed.")
    direct = open_direct(conversation)
    if direct is not None:
        raise PoppyError(
            "direct_conversation_open",
            "A Direct Conversation is open: continue there.",
            extra={"conversation_id": direct.id},
        )


def _replay(principal: Principal, message: InboundMessage, target: str) -> Answer | None:
    """The first delivery's answer for a retry; ``message_id_conflict`` for other content."""
    found = list(
        # Unique per personal agent, User and message id: at most one row, so no ORDER BY;
        # only what a retry's answer and its ownership check read.
        MessageReceipt.objects.filter(
            client_id=principal.client_id, user_id=principal.user_id, message_id=message.id
        )
        .select_related("conversation")
        .only(
            "fingerprint",
            "status_code",
            "answer",
            "conversation",
            *(f"conversation__{name}" for name in OWNER_FIELDS),
        )[:1]
    )
    if not found:
        return None
    receipt = found[0]
    if receipt.fingerprint != message.fingerprint(target):
        raise PoppyError(
            "message_id_conflict", "This message id was already used with other content."
        )
    # The same User under another account, or signed out, may not learn of the conversation
    # (its id, status or responder): the wire's ownership answer instead.
    check_owner(principal, receipt.conversation)
    return Answer(receipt.status_code, receipt.answer)


def merged_context(conversation: Conversation, update: dict[str, Any]) -> dict[str, Any]:
    """The conversation's context with ``update`` merged in, refused past MAX_CONTEXT_BYTES."""
    merged = {**conversation.context, **update}
    limit = poppy_settings.MAX_CONTEXT_BYTES
    if len(json.dumps(merged)) > limit:
        raise PoppyError(
            "invalid_request", f"The conversation's context would exceed {limit} bytes."
        )
    return merged


def _record(
    principal: Principal,
    conversation: Conversation,
    message: InboundMessage,
    target: str,
    status_code: int,
) -> Answer:
    """Append the user message, start or route its turn, and write the receipt.

    The events, the conversation's row and the receipt are written together (one statement
    on PostgreSQL), before the signal (whose receivers may read them).
    """
    payload = event_log.message_payload(
        message_id=message.id,
        role="user",
        sender=message.sender,
        text=message.text,
        data=message.data,
        context=message.context,
    )
    receipt: list[models.Model] = []
    with event_log.one_write(conversation, rows=receipt):
        _bind_account(principal, conversation)
        if message.context:
            conversation.context = merged_context(conversation, message.context)
            event_log.save(conversation, "context")
        event = event_log.append(
            conversation,
            EventType.MESSAGE,
            payload,
            # The request's ids: a turn the recovery sweep takes up later still names them.
            meta={"principal": principal.to_dict(), **tracing.origin()},
            message_id=message.id,
            role="user",
        )
        if lifecycle.WITH_PEOPLE(conversation):
            # A person has it (or is being found): the agent stays out, the app's hook gets
            # every message (a context update included: the person may need it).
            lifecycle.answered_without_turn(conversation, event.seq)
            handoff.forward_message_on_commit(conversation.id, payload["message"])
        elif (survey := csat.take_answer(conversation, message)) is not None:
            # An answer to the satisfaction survey: thanked, and no turn.
            csat.thank(conversation, survey)
            lifecycle.answered_without_turn(conversation, conversation.last_seq)
        elif message.starts_turn:
            # No dispatch while a live writer holds the lease: its commit answers this too.
            to_dispatch = lifecycle.agent_works(conversation)
            if to_dispatch:
                dispatch.dispatch_on_commit(conversation.id)
        answer = answer_of(conversation, status_code)
        # Written with the events and the row (one statement on PostgreSQL): a retry's
        # receipt breaks its unique key and the whole write is rolled back (_idempotent).
        receipt.append(
            MessageReceipt(
                client_id=principal.client_id,
                user_id=principal.user_id,
                message_id=message.id,
                fingerprint=message.fingerprint(target),
                conversation=conversation,
                status_code=status_code,
                answer=answer.body,
            )
        )
    observe.moment(
        "message_received",
        signals.message_received,
        conversation_id=conversation.id,
        message_id=message.id,
        starts_turn=message.starts_turn,
        private={"message": payload["message"]},
    )
    return answer


def _idempotent(principal: Principal, message: InboundMessage, target: str, write: Any) -> Answer:
    """Run ``write`` once per message id: a new message is written without a lookup first.

    A retry's write is refused (by the receipt's unique key, or earlier: the conversation
    closed since, say) and rolled back; its answer is then the first delivery's, as for a
    concurrent duplicate.
    """
    try:
        with transaction.atomic():
            answer: Answer = write()
            return answer
    except (IntegrityError, PoppyError):
        replay = _replay(principal, message, target)
        if replay is None:
            raise
        return replay


def start(principal: Principal, message: InboundMessage, parent_id: str | None) -> Answer:
    """``POST {endpoint}``: a new conversation (a Direct Conversation with a parent)."""
    target = f"parent:{parent_id or ''}"

    def write() -> Answer:
        parent = None
        if parent_id is not None:
            parent = get_owned(principal, parent_id, for_update=True)
            if parent.is_direct:
                raise PoppyError("conversation_not_found")
            _check_accepts_messages(parent)
        conversation = Conversation.objects.create(
            client_id=principal.client_id,
            user_id=principal.user_id,
            account_id=principal.account_id if principal.signed_in else None,
            parent=parent,
            agent_name=parent.agent_name if parent else agent_for(principal, message.context),
        )
        if parent is not None:
            with event_log.one_write(parent):
                _bind_account(principal, parent)
                parent.opened_direct = True
                event_log.save(parent, "opened_direct")
                event_log.append(
                    parent, EventType.DIRECT_OPENED, {"conversation_id": conversation.id}
                )
            handoff.direct_hook_on_commit("opened", conversation.id, parent.id)
            observe.moment(
                "direct_opened",
                signals.direct_opened,
                conversation_id=conversation.id,
                parent_id=parent.id,
            )
        observe.moment(
            "conversation_started",
            signals.conversation_started,
            conversation_id=conversation.id,
            client_id=principal.client_id,
            direct=parent is not None,
        )
        return _record(principal, conversation, message, target, 201)

    return _idempotent(principal, message, target, write)


def post_message(principal: Principal, conversation_id: str, message: InboundMessage) -> Answer:
    """``POST {endpoint}/{id}/messages``.

    Ownership is checked by the locked read (a retry's by its receipt, which names the same
    conversation): no read of the conversation before. Only a message id used elsewhere
    needs one, since the wire answers an unknown or foreign conversation first.
    """
    target = f"conversation:{conversation_id}"

    def write() -> Answer:
        conversation = get_owned(principal, conversation_id, for_update=True)
        _check_accepts_messages(conversation)
        return _record(principal, conversation, message, target, 202)

    try:
        return _idempotent(principal, message, target, write)
    except PoppyError as error:
        if error.code == "message_id_conflict":
            get_owned(principal, conversation_id)
        raise


@transaction.atomic
def request_handoff(principal: Principal, conversation_id: str) -> Answer:
    """``POST {endpoint}/{id}/handoff``: ask for a person through the request hook, within
    the bounds on waiting handoffs (:func:`poppy_django.staff.waiting.admit`: else ``429``)."""
    conversation = get_owned(principal, conversation_id, for_update=True)
    _check_accepts_messages(conversation)
    if not lifecycle.WITH_PEOPLE(conversation):  # asking again while waiting adds nothing
        waiting.admit(conversation)
    _bind_account(principal, conversation)
    handoff.request(conversation, initiator="personal_agent")
    return answer_of(conversation, 202)


@transaction.atomic
def close(principal: Principal, conversation_id: str) -> Answer:
    """``POST {endpoint}/{id}/close``: closing again adds nothing."""
    lock_parent_first(conversation_id)
    conversation = get_owned(principal, conversation_id, for_update=True)
    close_locked(conversation, by="personal_agent")
    return answer_of(conversation, 200)


def lock_parent_first(conversation_id: str) -> None:
    """Locks are always taken parent before child, so two closes cannot deadlock."""
    parent_id = (
        Conversation.objects.filter(pk=conversation_id).values_list("parent_id", flat=True).first()
        if ids.is_valid_id(conversation_id)
        else None
    )
    if parent_id:
        event_log.lock(parent_id)


def close_locked(
    conversation: Conversation, *, by: str, meta: dict[str, Any] | None = None
) -> None:
    """Close a locked conversation: its open Direct Conversation first, then itself."""
    if lifecycle.CLOSED(conversation):
        return
    direct = open_direct(conversation)
    if direct is not None:
        close_locked(event_log.lock(direct.id), by=by, meta=meta)
        # That appended direct_closed here through another instance: take up its sequence.
        conversation.refresh_from_db(fields=["last_seq"])
    if lifecycle.QUEUED(conversation):
        handoff.cancel_on_commit(conversation.id)
    handoffs.ended(conversation)
    lifecycle.close(conversation, meta)
    if conversation.parent_id is not None:
        parent = event_log.lock(conversation.parent_id)
        event_log.append(
            parent, EventType.DIRECT_CLOSED, {"conversation_id": conversation.id}, meta=meta
        )
        handoff.direct_hook_on_commit("closed", conversation.id, parent.id)
        observe.moment(
            "direct_closed",
            signals.direct_closed,
            conversation_id=conversation.id,
            parent_id=parent.id,
        )
    observe.moment(
        "conversation_closed", signals.conversation_closed, conversation_id=conversation.id, by=by
    )
