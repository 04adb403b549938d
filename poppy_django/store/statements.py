"""The hottest statements, written out once as SQL instead of built by the ORM on every run.

A read (its row and its page's events) and the locking read every write starts with run on
nearly every request, and a turn's lease, its messages, its thread's window, its reply's
receipt and the approvals it looks for are statements of every turn; live profiles showed
the ORM building and compiling such querysets costing about three times their execution
(docs/benchmarks.md). They are written from the models' metadata, each identifier quoted by
the database's own ``connection.ops.quote_name`` (values are always parameters), once per
database alias: :class:`Statements` belongs to that alias's store backend
(:mod:`poppy_django.store.backends`), which runs them and chooses the forms only PostgreSQL
has (they say so).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db import models

from poppy_django.models import ActionRecord, AgentThread, AgentThreadEntry, Conversation, Event


class Statements:
    """The statements of one database (its quoting), each built once and kept."""

    #: The least a database can answer: the readiness probe's round trip.
    ROUND_TRIP = "SELECT 1"
    #: PostgreSQL's lock on a number until the transaction ends (no row needed).
    ADVISORY_LOCK = "SELECT pg_advisory_xact_lock(%s)"
    #: PostgreSQL's bound on each statement, until the transaction ends.
    STATEMENT_TIMEOUT = "SELECT set_config('statement_timeout', %s, true)"

    def __init__(self, quote: Callable[[str], str]) -> None:
        #: The connection's ``ops.quote_name``: how this database quotes an identifier.
        self._quote = quote
        self._built: dict[tuple[Any, ...], str] = {}

    def q(self, name: str | None) -> str:
        """An identifier (a column or table name) quoted for this database."""
        assert name is not None
        return self._quote(name)

    def _kept(self, key: tuple[Any, ...], build: Callable[[], str]) -> str:
        found = self._built.get(key)
        if found is None:
            found = self._built[key] = build()
        return found

    def _column(self, model: type[models.Model], name: str) -> str:
        field = model._meta.get_field(name)
        if not isinstance(field, models.Field):
            raise TypeError(f"{model.__name__}.{name} is not a column")
        return self.q(field.column)

    def _columns(self, model: type[models.Model], names: tuple[str, ...]) -> str:
        return ", ".join(self._column(model, name) for name in ("id", *names))

    def _every_column(self, model: type[models.Model]) -> str:
        return ", ".join(self.q(field.column) for field in model._meta.concrete_fields)

    def _table(self, model: type[models.Model]) -> str:
        return self.q(model._meta.db_table)

    # -- reads ------------------------------------------------------------------------------

    def conversation_by_id(self, fields: tuple[str, ...]) -> str:
        """The conversation's id and ``fields``; parameter: its id."""
        return self._kept(
            ("conversation_by_id", fields),
            lambda: (
                f"SELECT {self._columns(Conversation, fields)} FROM {self._table(Conversation)}"  # noqa: S608 - identifiers only
                f" WHERE {self._column(Conversation, 'id')} = %s"
            ),
        )

    def _in_seq_range(self) -> str:
        """Events of one conversation in a ``seq`` range; parameters: its id, the ``seq`` to
        read after, the last ``seq`` to read."""
        seq = self._column(Event, "seq")
        return f"{self._column(Event, 'conversation')} = %s AND {seq} > %s AND {seq} <= %s"

    def events_in_range(self, fields: tuple[str, ...]) -> str:
        """A conversation's events' ids and ``fields`` in ``seq`` order; parameters: those of
        :meth:`_in_seq_range`, then the most rows."""
        return self._kept(
            ("events_in_range", fields),
            lambda: (
                f"SELECT {self._columns(Event, fields)} FROM {self._table(Event)}"  # noqa: S608 - identifiers only
                f" WHERE {self._in_seq_range()} ORDER BY {self._column(Event, 'seq')} LIMIT %s"
            ),
        )

    def conversation_and_events(
        self, fields: tuple[str, ...], event_fields: tuple[str, ...]
    ) -> str:
        """PostgreSQL only (``LATERAL``): :meth:`conversation_by_id`'s columns, each row
        followed by one of the conversation's events after a ``seq`` and up to its
        ``last_seq`` (the event's id and ``event_fields``), in ``seq`` order: one statement,
        so one snapshot and one round trip for a read's row and page. With no such event,
        one row whose event columns are null. Parameters: the ``seq`` to read after, the most
        events, the conversation's id."""

        def build() -> str:
            column = self._column
            row = ", ".join(f"c.{column(Conversation, name)}" for name in ("id", *fields))
            seq = column(Event, "seq")
            return (
                f"SELECT {row}, e.* FROM {self._table(Conversation)} c LEFT JOIN LATERAL ("  # noqa: S608 - identifiers only
                f"SELECT {self._columns(Event, event_fields)} FROM {self._table(Event)}"
                f" WHERE {column(Event, 'conversation')} = c.{column(Conversation, 'id')}"
                f" AND {seq} > %s AND {seq} <= c.{column(Conversation, 'last_seq')}"
                f" ORDER BY {seq} LIMIT %s) e ON TRUE"
                f" WHERE c.{column(Conversation, 'id')} = %s ORDER BY e.{seq}"
            )

        return self._kept(("conversation_and_events", fields, event_fields), build)

    def conversation_locked(self, row_locks: bool) -> str:
        """The whole conversation row, locked until the transaction ends; parameter: its id.
        ``row_locks``: the database has ``FOR UPDATE`` (SQLite has no row locks: its writers
        take the whole database)."""
        suffix = " FOR UPDATE" if row_locks else ""
        return self._kept(
            ("conversation_locked", row_locks),
            lambda: (
                f"SELECT {self._every_column(Conversation)} FROM {self._table(Conversation)}"  # noqa: S608
                f" WHERE {self._column(Conversation, 'id')} = %s{suffix}"
            ),
        )

    def messages_in_range(self) -> str:
        """A conversation's messages from one role, every column, in ``seq`` order;
        parameters: those of :meth:`_in_seq_range`, then the message event type and the
        role."""
        return self._kept(
            ("messages_in_range",),
            lambda: (
                f"SELECT {self._every_column(Event)} FROM {self._table(Event)}"  # noqa: S608 - identifiers only
                f" WHERE {self._in_seq_range()} AND {self._column(Event, 'type')} = %s"
                f" AND {self._column(Event, 'role')} = %s ORDER BY {self._column(Event, 'seq')}"
            ),
        )

    def _approved_actions(self) -> str:
        """A conversation's actions in one status (staff approved, no worker ran them yet);
        parameters: its id, the status."""
        return (
            f"SELECT 1 FROM {self._table(ActionRecord)}"  # noqa: S608 - identifiers only
            f" WHERE {self._column(ActionRecord, 'conversation')} = %s"
            f" AND {self._column(ActionRecord, 'status')} = %s"
        )

    def messages_and_approved(self) -> str:
        """PostgreSQL only (``LATERAL``): whether the conversation has actions in a status
        (staff approved, no worker ran them yet), each row followed by one of
        :meth:`messages_in_range`'s (every column of an event): one statement for a claim's
        two reads. With no such message, one row whose event columns are null. Parameters:
        its id, the status, then those of :meth:`messages_in_range`."""

        def build() -> str:
            seq = self._column(Event, "seq")
            return (
                f"SELECT a.approved, e.* FROM (SELECT EXISTS ({self._approved_actions()})"  # noqa: S608 - identifiers only
                f" AS approved) a LEFT JOIN LATERAL ({self.messages_in_range()}) e ON TRUE"
                f" ORDER BY e.{seq}"
            )

        return self._kept(("messages_and_approved",), build)

    def message_id_taken(self) -> str:
        """One row when the conversation has an event with the message id; parameters: its
        id, the message id."""
        return self._kept(
            ("message_id_taken",),
            lambda: (
                f"SELECT 1 FROM {self._table(Event)}"  # noqa: S608 - identifiers only
                f" WHERE {self._column(Event, 'conversation')} = %s"
                f" AND {self._column(Event, 'message_id')} = %s LIMIT 1"
            ),
        )

    def reply_written_and_actions_approved(self) -> str:
        """Two booleans: whether the conversation has an event with the message id, and
        whether it has actions staff approved that no worker ran yet; parameters: its id,
        the message id, its id again, the approved status."""

        def build() -> str:
            approved = self._approved_actions()
            return f"SELECT EXISTS ({self.message_id_taken()}), EXISTS ({approved})"

        return self._kept(("reply_written_and_actions_approved",), build)

    def actions_in_status(self) -> str:
        """The ids of a conversation's actions in one status, oldest first; parameters: its
        id, the status."""

        def build() -> str:
            column = self._column
            return (
                f"SELECT {column(ActionRecord, 'id')} FROM {self._table(ActionRecord)}"  # noqa: S608 - identifiers only
                f" WHERE {column(ActionRecord, 'conversation')} = %s"
                f" AND {column(ActionRecord, 'status')} = %s"
                f" ORDER BY {column(ActionRecord, 'created_at')}, {column(ActionRecord, 'id')}"
            )

        return self._kept(("actions_in_status",), build)

    # -- leases -----------------------------------------------------------------------------

    def lease_taken(self, owner_field: str, until_field: str) -> str:
        """Give a conversation's lease (or agent thread) to an owner unless another holds it
        unexpired, one row updated when given; parameters: the owner, until when, its id,
        now, the owner again."""

        def build() -> str:
            owner = self._column(Conversation, owner_field)
            until = self._column(Conversation, until_field)
            return (
                f"UPDATE {self._table(Conversation)} SET {owner} = %s, {until} = %s"  # noqa: S608
                f" WHERE {self._column(Conversation, 'id')} = %s"
                f" AND ({owner} IS NULL OR {until} < %s OR {owner} = %s)"
            )

        return self._kept(("lease_taken", owner_field, until_field), build)

    def lease_taken_and_locked(self) -> str:
        """:meth:`lease_taken` for the conversation lease, returning the whole row
        (PostgreSQL: it is locked until the transaction ends); parameters as there."""
        return self._kept(
            ("lease_taken_and_locked",),
            lambda: (
                f"{self.lease_taken('lease_owner', 'lease_expires_at')}"
                f" RETURNING {self._every_column(Conversation)}"
            ),
        )

    def leases_renewed(self, among: str) -> str:
        """Renew until a moment every conversation lease and agent thread held by one of some
        owners, returning the conversation leases' owners renewed. ``among``: how the
        database tests membership (``= ANY(%s)`` or ``IN (%s, ...)``); parameters: the owners
        (as ``among`` takes them), the moment, the owners, the moment, the owners twice."""

        def build() -> str:
            column = self._column
            lease_owner = column(Conversation, "lease_owner")
            lease_until = column(Conversation, "lease_expires_at")
            thread_owner = column(Conversation, "thread_owner")
            thread_until = column(Conversation, "thread_expires_at")
            return (
                f"UPDATE {self._table(Conversation)} SET"  # noqa: S608 - identifiers only
                f" {lease_until} = CASE WHEN {lease_owner} {among} THEN %s ELSE {lease_until} END,"
                f" {thread_until} = CASE WHEN {thread_owner} {among} THEN %s"
                f" ELSE {thread_until} END"
                f" WHERE {lease_owner} {among} OR {thread_owner} {among}"
                f" RETURNING {lease_owner}"
            )

        return self._kept(("leases_renewed", among), build)

    # -- agent threads ------------------------------------------------------------------------

    def _actors_thread(self, alias: str = "") -> str:
        """An actor's agent thread in a conversation (its table as ``alias``, if given);
        parameters: the conversation's id, the actor's id."""
        conversation = self._column(AgentThread, "conversation")
        actor = self._column(AgentThread, "actor_id")
        return f"{alias}{conversation} = %s AND {alias}{actor} = %s"

    def thread_window(self) -> str:
        """The roles and texts of an actor's newest thread entries in a conversation, newest
        first; parameters: the conversation's id, the actor's id, the most entries."""

        def build() -> str:
            column = self._column
            role, text = column(AgentThreadEntry, "role"), column(AgentThreadEntry, "text")
            return (
                f"SELECT e.{role}, e.{text} FROM {self._table(AgentThreadEntry)} e"  # noqa: S608
                f" JOIN {self._table(AgentThread)} t"
                f" ON e.{column(AgentThreadEntry, 'thread')} = t.{column(AgentThread, 'id')}"
                f" WHERE {self._actors_thread('t.')}"
                f" ORDER BY e.{column(AgentThreadEntry, 'position')} DESC LIMIT %s"
            )

        return self._kept(("thread_window",), build)

    def thread_made_alone(self) -> str:
        """PostgreSQL only (a data-modifying ``WITH``): make an actor's agent thread in a
        conversation that has no other actor's thread, unless the actor's exists: the new
        thread's id (no row: none made). Parameters: the conversation's id, the actor's id,
        then the conversation's id, the actor's id and now twice (the new row's)."""

        def build() -> str:
            column = self._column
            conversation, actor = (
                column(AgentThread, "conversation"),
                column(AgentThread, "actor_id"),
            )
            key = column(AgentThread, "id")
            columns = ", ".join(
                column(AgentThread, name)
                for name in (
                    "conversation",
                    "actor_id",
                    "last_position",
                    "created_at",
                    "updated_at",
                )
            )
            table = self._table(AgentThread)
            return (
                f"WITH others AS (SELECT EXISTS (SELECT 1 FROM {table}"  # noqa: S608 - identifiers only
                f" WHERE {conversation} = %s AND {actor} <> %s) AS found),"
                f" made AS (INSERT INTO {table} ({columns}) SELECT %s, %s, 0, %s, %s"
                f" FROM others WHERE NOT others.found ON CONFLICT ({conversation}, {actor})"
                f" DO NOTHING RETURNING {key})"
                f" SELECT {key} FROM made"
            )

        return self._kept(("thread_made_alone",), build)

    def thread_positions_taken(self) -> str:
        """Take the next positions of an actor's thread in a conversation, its row locked
        until the transaction ends, returning the thread's id and its new last position;
        parameters: how many, now, the conversation's id, the actor's id."""

        def build() -> str:
            last = self._column(AgentThread, "last_position")
            updated = self._column(AgentThread, "updated_at")
            return (
                f"UPDATE {self._table(AgentThread)} SET {last} = {last} + %s, {updated} = %s"  # noqa: S608
                f" WHERE {self._actors_thread()}"
                f" RETURNING {self._column(AgentThread, 'id')}, {last}"
            )

        return self._kept(("thread_positions_taken",), build)

    def thread_entries_clauses(self) -> str:
        """PostgreSQL only: :meth:`thread_positions_taken` and the entries written at those
        positions as two data-modifying ``WITH`` clauses, ``thread_taken`` and
        ``thread_entries`` (the thread's id once per entry written; no row: no such thread),
        for a statement that may write more; parameters: how many, now, the conversation's
        id, the actor's id, how many, now, then the entries' numbers (1, 2, ...), roles and
        texts as arrays."""

        def build() -> str:
            column = self._column
            columns = ", ".join(
                column(AgentThreadEntry, name) for name in ("thread", "position", "role", "text")
            )
            last = column(AgentThread, "last_position")
            return (
                f"thread_taken AS ({self.thread_positions_taken()}),"  # noqa: S608 - identifiers only
                f" thread_entries AS (INSERT INTO {self._table(AgentThreadEntry)}"
                f" ({columns}, {column(AgentThreadEntry, 'created_at')})"
                f" SELECT thread_taken.{column(AgentThread, 'id')}, thread_taken.{last} - %s + e.n,"
                " e.role, e.text, %s FROM thread_taken,"
                " unnest(%s::integer[], %s::text[], %s::text[]) AS e(n, role, text)"
                f" RETURNING {column(AgentThreadEntry, 'thread')})"
            )

        return self._kept(("thread_entries_clauses",), build)

    def thread_entries_appended(self) -> str:
        """PostgreSQL only: :meth:`thread_entries_clauses` as one statement, a row per entry
        written (none: no such thread); parameters as there."""
        return self._kept(
            ("thread_entries_appended",),
            lambda: f"WITH {self.thread_entries_clauses()} SELECT 1 FROM thread_entries",  # noqa: S608
        )

    # -- writes of a row as Model.save() writes it --------------------------------------------

    def insert(self, rows: list[models.Model], connection: Any) -> tuple[str, list[Any]]:
        """One ``INSERT`` of rows of one model (its generated primary key left to the
        database), values prepared by the fields as ``Model.save()`` prepares them
        (``auto_now_add``...)."""
        meta = rows[0]._meta
        fields = [f for f in meta.concrete_fields if f is not meta.auto_field]
        placeholders = ", ".join(["%s"] * len(fields))
        params: list[Any] = []
        for row in rows:
            for f in fields:
                params.append(f.get_db_prep_save(f.pre_save(row, True), connection))
        columns = ", ".join(self.q(f.column) for f in fields)
        values = ", ".join(f"({placeholders})" for _ in rows)
        return f"INSERT INTO {self.q(meta.db_table)} ({columns}) VALUES {values}", params  # noqa: S608

    def update(self, row: models.Model, names: list[str], connection: Any) -> tuple[str, list[Any]]:
        """One ``UPDATE`` of these fields of a row by its primary key (``auto_now``
        applied)."""
        meta = row._meta
        fields = [_concrete(row, name) for name in names]
        params = [f.get_db_prep_save(f.pre_save(row, False), connection) for f in fields]
        assignments = ", ".join(f"{self.q(f.column)} = %s" for f in fields)
        pk = meta.pk
        assert pk is not None
        params.append(pk.get_db_prep_value(row.pk, connection))
        table, key = self.q(meta.db_table), self.q(pk.column)
        return f"UPDATE {table} SET {assignments} WHERE {key} = %s", params  # noqa: S608

    def written_at_once(
        self,
        connection: Any,
        inserts: list[list[models.Model]],
        update: tuple[models.Model, list[str]] | None,
        along: Sequence[tuple[str, list[Any], str]] = (),
    ) -> tuple[str, list[Any]]:
        """PostgreSQL only: several writes as one statement (data-modifying ``WITH``
        clauses): one round trip for what would be one per write. Every part runs, on one
        snapshot, or none (a unique violation in any fails the statement, and the
        transaction with it). ``along``: other tables' writes, each its ``WITH`` clauses,
        their parameters and the clause whose rows it wrote: the statement then returns one
        row, the number of rows each of those clauses wrote."""
        parts = [self.insert(rows, connection) for rows in inserts if rows]
        if update is not None and update[1]:
            parts.append(self.update(update[0], update[1], connection))
        if along:
            written = [clause for clause, _, _ in along]
            written += [f"w{number} AS ({sql})" for number, (sql, _) in enumerate(parts)]
            counts = ", ".join(f"(SELECT count(*) FROM {counted})" for _, _, counted in along)  # noqa: S608
            params = [param for _, part, _ in along for param in part]
            params += [param for _, part in parts for param in part]
            return f"WITH {', '.join(written)} SELECT {counts}", params
        *first, last = parts
        clauses = ", ".join(f"w{number} AS ({sql})" for number, (sql, _) in enumerate(first))
        statement = f"WITH {clauses} {last[0]}" if first else last[0]
        params = [param for _, part in (*first, last) for param in part]
        return statement, params


def _concrete(row: models.Model, name: str) -> models.Field[Any, Any]:
    field = row._meta.get_field(name)
    if not isinstance(field, models.Field):
        raise TypeError(f"{type(row).__name__}.{name} is not a column")
    return field
