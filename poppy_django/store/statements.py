"""The hottest statements, written out once as SQL instead of built by the ORM on every run.

A read (its row and its page's events) and the locking read every write starts with run on
nearly every request, and a turn's lease, its messages, its thread's window, its reply's
receipt and the approvals it looks for are statements of every turn; live profiles showed
the ORM building and compiling such querysets costing about three times their execution
(docs/benchmarks.md). They are written from the models' metadata in standard SQL
(double-quoted identifiers; values are always parameters), so PostgreSQL and SQLite run the
same text, through a cursor or :func:`poppy_django.store.instances.fetch` (model instances,
the fields' converters applied); the few that only PostgreSQL runs say so.
"""

from __future__ import annotations

import functools
from typing import Any

from django.db import models

from poppy_django.models import ActionRecord, AgentThread, AgentThreadEntry, Conversation, Event


def _column(model: type[models.Model], name: str) -> str:
    field = model._meta.get_field(name)
    if not isinstance(field, models.Field):
        raise TypeError(f"{model.__name__}.{name} is not a column")
    return f'"{field.column}"'


def _columns(model: type[models.Model], names: tuple[str, ...]) -> str:
    return ", ".join(_column(model, name) for name in ("id", *names))


def _every_column(model: type[models.Model]) -> str:
    return ", ".join(f'"{field.column}"' for field in model._meta.concrete_fields)


@functools.cache
def conversation_by_id(fields: tuple[str, ...]) -> str:
    """The conversation's id and ``fields``; parameter: its id."""
    table = Conversation._meta.db_table
    return (
        f'SELECT {_columns(Conversation, fields)} FROM "{table}"'  # noqa: S608 - identifiers only
        f" WHERE {_column(Conversation, 'id')} = %s"
    )


def _in_seq_range() -> str:
    """Events of one conversation in a ``seq`` range; parameters: its id, the ``seq`` to read
    after, the last ``seq`` to read."""
    seq = _column(Event, "seq")
    return f"{_column(Event, 'conversation')} = %s AND {seq} > %s AND {seq} <= %s"


@functools.cache
def events_in_range(fields: tuple[str, ...]) -> str:
    """A conversation's events' ids and ``fields`` in ``seq`` order; parameters: those of
    :func:`_in_seq_range`, then the most rows."""
    table = Event._meta.db_table
    return (
        f'SELECT {_columns(Event, fields)} FROM "{table}"'  # noqa: S608 - identifiers only
        f" WHERE {_in_seq_range()} ORDER BY {_column(Event, 'seq')} LIMIT %s"
    )


@functools.cache
def conversation_and_events(fields: tuple[str, ...], event_fields: tuple[str, ...]) -> str:
    """PostgreSQL only (``LATERAL``): :func:`conversation_by_id`'s columns, each row followed
    by one of the conversation's events after a ``seq`` and up to its ``last_seq`` (the
    event's id and ``event_fields``), in ``seq`` order: one statement, so one snapshot and one
    round trip for a read's row and page. With no such event, one row whose event columns are
    null. Parameters: the ``seq`` to read after, the most events, the conversation's id."""
    table, events = Conversation._meta.db_table, Event._meta.db_table
    row = ", ".join(f"c.{_column(Conversation, name)}" for name in ("id", *fields))
    seq = _column(Event, "seq")
    return (
        f'SELECT {row}, e.* FROM "{table}" c LEFT JOIN LATERAL ('  # noqa: S608 - identifiers only
        f'SELECT {_columns(Event, event_fields)} FROM "{events}"'
        f" WHERE {_column(Event, 'conversation')} = c.{_column(Conversation, 'id')}"
        f" AND {seq} > %s AND {seq} <= c.{_column(Conversation, 'last_seq')}"
        f" ORDER BY {seq} LIMIT %s) e ON TRUE"
        f" WHERE c.{_column(Conversation, 'id')} = %s ORDER BY e.{seq}"
    )


@functools.cache
def conversation_locked(vendor: str) -> str:
    """The whole conversation row, locked until the transaction ends; parameter: its id."""
    meta = Conversation._meta
    # SQLite has no row locks (and no FOR UPDATE): its writers take the whole database.
    suffix = "" if vendor == "sqlite" else " FOR UPDATE"
    return (
        f'SELECT {_every_column(Conversation)} FROM "{meta.db_table}"'  # noqa: S608
        f' WHERE "{meta.pk.column}" = %s{suffix}'
    )


@functools.cache
def messages_in_range() -> str:
    """A conversation's messages from one role, every column, in ``seq`` order; parameters:
    those of :func:`_in_seq_range`, then the message event type and the role."""
    table = Event._meta.db_table
    return (
        f'SELECT {_every_column(Event)} FROM "{table}"'  # noqa: S608 - identifiers only
        f" WHERE {_in_seq_range()} AND {_column(Event, 'type')} = %s"
        f" AND {_column(Event, 'role')} = %s ORDER BY {_column(Event, 'seq')}"
    )


@functools.cache
def message_id_taken() -> str:
    """One row when the conversation has an event with the message id; parameters: its id,
    the message id."""
    return (
        f'SELECT 1 FROM "{Event._meta.db_table}"'  # noqa: S608 - identifiers only
        f" WHERE {_column(Event, 'conversation')} = %s AND {_column(Event, 'message_id')} = %s"
        " LIMIT 1"
    )


@functools.cache
def reply_written_and_actions_approved() -> str:
    """Two booleans: whether the conversation has an event with the message id, and whether it
    has actions staff approved that no worker ran yet; parameters: its id, the message id,
    its id again, the approved status."""
    event_with_id = message_id_taken()
    approved = (
        f'SELECT 1 FROM "{ActionRecord._meta.db_table}"'  # noqa: S608 - identifiers only
        f" WHERE {_column(ActionRecord, 'conversation')} = %s"
        f" AND {_column(ActionRecord, 'status')} = %s"
    )
    return f"SELECT EXISTS ({event_with_id}), EXISTS ({approved})"


@functools.cache
def lease_taken(owner_field: str, until_field: str) -> str:
    """Give a conversation's lease (or agent thread) to an owner unless another holds it
    unexpired, one row updated when given; parameters: the owner, until when, its id, now,
    the owner again."""
    owner, until = _column(Conversation, owner_field), _column(Conversation, until_field)
    return (
        f'UPDATE "{Conversation._meta.db_table}" SET {owner} = %s, {until} = %s'  # noqa: S608
        f" WHERE {_column(Conversation, 'id')} = %s"
        f" AND ({owner} IS NULL OR {until} < %s OR {owner} = %s)"
    )


@functools.cache
def lease_taken_and_locked() -> str:
    """:func:`lease_taken` for the conversation lease, returning the whole row (PostgreSQL: it
    is locked until the transaction ends); parameters as there."""
    return (
        f"{lease_taken('lease_owner', 'lease_expires_at')} RETURNING {_every_column(Conversation)}"
    )


def _actors_thread(alias: str = "") -> str:
    """An actor's agent thread in a conversation (its table as ``alias``, if given);
    parameters: the conversation's id, the actor's id."""
    conversation, actor = _column(AgentThread, "conversation"), _column(AgentThread, "actor_id")
    return f"{alias}{conversation} = %s AND {alias}{actor} = %s"


@functools.cache
def thread_window() -> str:
    """The roles and texts of an actor's newest thread entries in a conversation, newest
    first; parameters: the conversation's id, the actor's id, the most entries."""
    entries, threads = AgentThreadEntry._meta.db_table, AgentThread._meta.db_table
    role, text = _column(AgentThreadEntry, "role"), _column(AgentThreadEntry, "text")
    return (
        f'SELECT e.{role}, e.{text} FROM "{entries}" e JOIN "{threads}" t'  # noqa: S608
        f" ON e.{_column(AgentThreadEntry, 'thread')} = t.{_column(AgentThread, 'id')}"
        f" WHERE {_actors_thread('t.')}"
        f" ORDER BY e.{_column(AgentThreadEntry, 'position')} DESC LIMIT %s"
    )


@functools.cache
def thread_positions_taken() -> str:
    """Take the next positions of an actor's thread in a conversation, its row locked until
    the transaction ends, returning the thread's id and its new last position; parameters:
    how many, now, the conversation's id, the actor's id."""
    last, updated = _column(AgentThread, "last_position"), _column(AgentThread, "updated_at")
    return (
        f'UPDATE "{AgentThread._meta.db_table}" SET {last} = {last} + %s, {updated} = %s'  # noqa: S608
        f" WHERE {_actors_thread()} RETURNING {_column(AgentThread, 'id')}, {last}"
    )


@functools.cache
def thread_entries_appended() -> str:
    """PostgreSQL only: :func:`thread_positions_taken` and the entries written at those
    positions in one statement (a data-modifying ``WITH``), returning the thread's id once
    per entry (no row: no such thread); parameters: how many, now, the conversation's id,
    the actor's id, now, then the entries' numbers (1, 2, ...), roles and texts as arrays."""
    entry = AgentThreadEntry._meta.db_table
    columns = ", ".join(
        _column(AgentThreadEntry, name) for name in ("thread", "position", "role", "text")
    )
    last = _column(AgentThread, "last_position")
    return (
        f"WITH taken AS ({thread_positions_taken()})"  # noqa: S608 - identifiers only
        f' INSERT INTO "{entry}" ({columns}, {_column(AgentThreadEntry, "created_at")})'
        f" SELECT taken.{_column(AgentThread, 'id')}, taken.{last} - %s + e.n, e.role, e.text, %s"
        " FROM taken, unnest(%s::integer[], %s::text[], %s::text[]) AS e(n, role, text)"
        f" RETURNING {_column(AgentThreadEntry, 'thread')}"
    )


@functools.cache
def actions_in_status() -> str:
    """The ids of a conversation's actions in one status, oldest first; parameters: its id,
    the status."""
    table, status = ActionRecord._meta.db_table, _column(ActionRecord, "status")
    return (
        f'SELECT {_column(ActionRecord, "id")} FROM "{table}"'  # noqa: S608 - identifiers only
        f" WHERE {_column(ActionRecord, 'conversation')} = %s AND {status} = %s"
        f" ORDER BY {_column(ActionRecord, 'created_at')}, {_column(ActionRecord, 'id')}"
    )


def leases_renewed(vendor: str, owners: list[str], until: Any) -> tuple[str, list[Any]]:
    """Renew until ``until`` every conversation lease and agent thread held by one of
    ``owners``, returning the conversation leases' owners renewed: the statement and its
    parameters (PostgreSQL takes the owners as one array, SQLite as a list of values)."""
    table = Conversation._meta.db_table
    lease_owner, lease_until = (
        _column(Conversation, "lease_owner"),
        _column(Conversation, "lease_expires_at"),
    )
    thread_owner, thread_until = (
        _column(Conversation, "thread_owner"),
        _column(Conversation, "thread_expires_at"),
    )
    values: list[Any]
    if vendor == "postgresql":
        among, values = "= ANY(%s)", [owners]
    else:
        among, values = f"IN ({', '.join(['%s'] * len(owners))})", list(owners)
    statement = (
        f'UPDATE "{table}" SET'  # noqa: S608 - identifiers only
        f" {lease_until} = CASE WHEN {lease_owner} {among} THEN %s ELSE {lease_until} END,"
        f" {thread_until} = CASE WHEN {thread_owner} {among} THEN %s ELSE {thread_until} END"
        f" WHERE {lease_owner} {among} OR {thread_owner} {among}"
        f" RETURNING {lease_owner}"
    )
    return statement, [*values, until, *values, until, *values, *values]


def _insert(rows: list[models.Model], connection: Any) -> tuple[str, list[Any]]:
    """One ``INSERT`` of rows of one model (its generated primary key left to the database),
    values prepared by the fields as ``Model.save()`` prepares them (``auto_now_add``...)."""
    meta = rows[0]._meta
    fields = [f for f in meta.concrete_fields if f is not meta.auto_field]
    placeholders = ", ".join(["%s"] * len(fields))
    params: list[Any] = []
    for row in rows:
        for f in fields:
            params.append(f.get_db_prep_save(f.pre_save(row, True), connection))
    columns = ", ".join(f'"{f.column}"' for f in fields)
    values = ", ".join(f"({placeholders})" for _ in rows)
    return f'INSERT INTO "{meta.db_table}" ({columns}) VALUES {values}', params  # noqa: S608


def _update(row: models.Model, names: list[str], connection: Any) -> tuple[str, list[Any]]:
    """One ``UPDATE`` of these fields of a row by its primary key (``auto_now`` applied)."""
    meta = row._meta
    fields = [_concrete(row, name) for name in names]
    params = [f.get_db_prep_save(f.pre_save(row, False), connection) for f in fields]
    assignments = ", ".join(f'"{f.column}" = %s' for f in fields)
    pk = meta.pk
    assert pk is not None
    params.append(pk.get_db_prep_value(row.pk, connection))
    statement = f'UPDATE "{meta.db_table}" SET {assignments} WHERE "{pk.column}" = %s'  # noqa: S608
    return statement, params


def _concrete(row: models.Model, name: str) -> models.Field[Any, Any]:
    field = row._meta.get_field(name)
    if not isinstance(field, models.Field):
        raise TypeError(f"{type(row).__name__}.{name} is not a column")
    return field


def written_at_once(
    connection: Any,
    inserts: list[list[models.Model]],
    update: tuple[models.Model, list[str]] | None,
) -> tuple[str, list[Any]]:
    """Several writes as one PostgreSQL statement (data-modifying ``WITH`` clauses): one
    round trip for what would be one per write. Every part runs, on one snapshot, or none
    (a unique violation in any fails the statement, and the transaction with it)."""
    parts = [_insert(rows, connection) for rows in inserts if rows]
    if update is not None and update[1]:
        parts.append(_update(update[0], update[1], connection))
    *first, last = parts
    clauses = ", ".join(f"w{number} AS ({sql})" for number, (sql, _) in enumerate(first))
    statement = f"WITH {clauses} {last[0]}" if first else last[0]
    params = [param for _, part in (*first, last) for param in part]
    return statement, params
