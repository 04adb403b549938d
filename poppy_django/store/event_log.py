"""Appending to a conversation's event log, under the conversation's row lock.

Every write path (personal agent requests, turns, the company side) goes through here, so
sequence numbers are gap-free per conversation and every append wakes readers on commit.

A write of several events (a message and its state change, a turn's reply and its
``answered_seq``) runs inside :func:`one_write`: its events are then inserted together and
the conversation's row written once, at the block's end, with every field the block
changed, and its readers get one nudge for the block's last event, not one per event.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import models, router, transaction
from django.db.models.functions import Greatest
from django.db.models.signals import post_delete
from django.dispatch import receiver

from poppy_django import fanout
from poppy_django.errors import PoppyError
from poppy_django.models import Conversation, Event, EventType
from poppy_django.store import backends


def lock(conversation_id: str) -> Conversation:
    """The conversation, row-locked until the surrounding transaction ends."""
    alias = router.db_for_write(Conversation)
    if not transaction.get_connection(alias).in_atomic_block:
        raise RuntimeError("event_log.lock() needs a transaction.atomic() block.")
    found = backends.for_alias(alias).locked_conversation(conversation_id)
    if found is None:
        raise PoppyError("conversation_not_found")
    return found


def has_message(conversation: Conversation, message_id: str) -> bool:
    """Whether the conversation already has an event with ``message_id`` (a reply written)."""
    return backends.for_writing(Event).has_message(conversation.id, message_id)


@dataclass
class _Pending:
    """What a :func:`one_write` block has changed and not yet written."""

    fields: set[str] = field(default_factory=set)
    events: list[Event] = field(default_factory=list)
    nudge: dict[str, Any] | None = None
    #: Whether the block's end is one statement where the database has one (``rows``).
    one_statement: bool = False
    along: list[backends.Along] = field(default_factory=list)


_PENDING = "_poppy_pending_write"


def _pending(conversation: Conversation) -> _Pending | None:
    pending: _Pending | None = conversation.__dict__.get(_PENDING)
    return pending


@contextmanager
def one_write(
    conversation: Conversation, *, rows: list[models.Model] | None = None
) -> Iterator[Conversation]:
    """Insert the block's events and write the locked conversation's row (and nudge its
    readers) once, when the block ends.

    Inside, :func:`append` and :func:`save` only change the instance and
    keep the events; the block's end inserts the events in one ``INSERT`` and writes the
    fields in one ``UPDATE``. Nothing in the block may read back the row or the events it
    appended (another instance of the row included): they are not written yet. A block
    inside another one for the same instance joins it.

    ``rows``: unsaved rows the block adds to this list (a message's receipt) are inserted
    with the events and the row; on PostgreSQL all of it is one statement, one round trip
    (:meth:`poppy_django.store.backends.PostgreSQLBackend.write`; the events then get no ``pk``
    back). An empty list asks for that one statement for the events and the row alone (a
    turn's reply and its ``answered_seq``). The conversation's row and the rows get the
    model signals ``save()`` sends on every database; the events none (``bulk_create``). On
    PostgreSQL a row's generated key is not read back (a receipt's ``pk`` stays None).
    """
    if _pending(conversation) is not None:
        if rows is not None:
            raise RuntimeError("rows are written by the outermost one_write() block only")
        yield conversation
        return
    pending = _Pending(one_statement=rows is not None)
    conversation.__dict__[_PENDING] = pending
    try:
        yield conversation
    finally:
        del conversation.__dict__[_PENDING]
    backends.for_writing(Conversation).write(
        conversation, pending.events, sorted(pending.fields), rows, pending.along
    )
    if pending.nudge is not None:
        _nudge(conversation, pending.events, pending.nudge)


@contextmanager
def one_statement(conversation: Conversation) -> Iterator[Conversation]:
    """A :func:`one_write` block written as one statement on PostgreSQL (its events get no
    ``pk`` back), or, inside another block for the same instance, part of that one."""
    rows: list[models.Model] | None = None if _pending(conversation) is not None else []
    with one_write(conversation, rows=rows):
        yield conversation


def write_along(conversation: Conversation, along: backends.Along) -> bool:
    """Write ``along`` (another table's rows, :meth:`~poppy_django.store.backends.StoreBackend.
    entries_along`) in the one statement that ends the :func:`one_write` block the
    conversation is in; False when the block has none (none is open, its end was not asked
    to be one statement, or another database writes ``along``'s table): the caller writes it
    itself."""
    pending = _pending(conversation)
    if pending is None or not pending.one_statement:
        return False
    if along.alias != router.db_for_write(Conversation):
        return False
    pending.along.append(along)
    return True


def expire_before(conversation_id: str, seq: int) -> None:
    """Events before ``seq`` are pruned (or about to be): a cursor into them is expired,
    never a gap. Only moves forward; the processes' tails of it are out of date."""
    Conversation.objects.filter(pk=conversation_id).update(
        pruned_before_seq=Greatest("pruned_before_seq", seq)
    )
    fanout.forget_version_on_commit(conversation_id)


@receiver(post_delete, sender=Conversation)
def _forget_deleted(sender: type[Conversation], instance: Conversation, **kwargs: Any) -> None:
    """A deleted conversation's tails are out of date (a read of it is then a 404)."""
    fanout.forget_version_on_commit(instance.pk)


def version_of(conversation: Conversation) -> str:
    """What readers compare to tell a conversation's state they hold from a newer one: its
    ``last_seq``, ``pruned_before_seq`` and whether it is bound to an account (which
    changes whose it is without an event)."""
    bound = "a" if conversation.account_id is not None else "n"
    return f"{conversation.last_seq}.{conversation.pruned_before_seq}.{bound}"


def _nudge(conversation: Conversation, events: list[Event], summary: dict[str, Any]) -> None:
    """Wake the conversation's readers on commit, telling the tails what was written: its
    events, state (with the account it is bound to) and :func:`version_of` (empty, which no
    tail holds, where the instance lacks one of its fields)."""
    known = conversation.__dict__
    if all(name in known for name in ("pruned_before_seq", "status", "responder", "account_id")):
        version = version_of(conversation)
        state = {
            "status": str(conversation.status),
            "responder": str(conversation.responder),
            "pruned_before_seq": conversation.pruned_before_seq,
            "account_id": conversation.account_id,
        }
    else:
        version, state = "", {}
    fanout.nudge_on_commit(
        conversation.id,
        conversation.last_seq,
        summary,
        version=version,
        state=state,
        events=lambda: [event.to_wire() for event in events],
    )


def save(conversation: Conversation, *fields: str) -> None:
    """Write these fields of the locked conversation (and ``updated_at``): now, or with the
    :func:`one_write` block it is in. Binding it to an account changes whose it is: the
    processes' tails of it are out of date (its :func:`version_of` changes too)."""
    if "account_id" in fields:
        fanout.forget_version_on_commit(conversation.id)
    pending = _pending(conversation)
    if pending is None:
        conversation.save(update_fields=[*fields, "updated_at"])
    else:
        pending.fields.update(fields)
        pending.fields.add("updated_at")


def append(
    conversation: Conversation,
    type: EventType | str,
    payload: dict[str, Any],
    *,
    meta: dict[str, Any] | None = None,
    message_id: str | None = None,
    role: str = "",
) -> Event:
    """Append one event to a locked conversation (written now, or at the end of the
    :func:`one_write` block it is in) and wake its readers when this commits."""
    conversation.last_seq += 1
    event = Event(
        conversation=conversation,
        seq=conversation.last_seq,
        type=type,
        payload=payload,
        meta=meta or {},
        message_id=message_id,
        role=role,
    )
    summary = {"type": str(type), "request_id": (meta or {}).get("request_id")}
    pending = _pending(conversation)
    if pending is None:
        event.save(force_insert=True)
        Conversation.objects.filter(pk=conversation.pk).update(last_seq=conversation.last_seq)
        _nudge(conversation, [event], summary)
    else:
        pending.events.append(event)
        pending.fields.add("last_seq")
        pending.nudge = summary
    return event


def message_payload(
    *,
    message_id: str,
    role: str,
    sender: str,
    text: str | None = None,
    data: dict[str, Any] | None = None,
    context: dict[str, Any] | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"id": message_id, "role": role, "sender": sender}
    if text is not None:
        message["text"] = text
    if data is not None:
        message["data"] = data
    if context is not None:
        message["context"] = context
    return {"message": message}


def append_company_message(
    conversation: Conversation,
    *,
    message_id: str,
    text: str,
    sender: str = "agent",
    data: dict[str, Any] | None = None,
    members: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> Event:
    """A message from the company (the Company Agent, or a person when ``sender="human"``);
    ``members``: what a part that plugs in adds to the message besides its text and data
    (the Operations extension: the operation it proposes, Operations v1 §4)."""
    payload = message_payload(
        message_id=message_id, role="company", sender=sender, text=text, data=data or None
    )
    payload["message"].update(members or {})
    return append(
        conversation,
        EventType.MESSAGE,
        payload,
        meta=meta,
        message_id=message_id,
        role="company",
    )
