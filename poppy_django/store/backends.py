"""One store backend per database alias: it runs every raw statement of the package and
makes every choice between databases.

The engine, the agent's memory, the leases and the log call a backend
(:func:`for_alias`, :func:`for_reading`, :func:`for_writing`), never a cursor. Its
:class:`~poppy_django.store.statements.Statements` quote identifiers with the connection's
own ``ops.quote_name``. :class:`StoreBackend` is what every database Django supports runs
(SQLite, the embedded default, included): portable statements, and the ORM where the
database's backend converts values itself (SQLite's dates and booleans) or where saving a
row is what sends its model signals. :class:`PostgreSQLBackend` uses what only PostgreSQL
has (``LATERAL``, ``RETURNING`` a locked row, data-modifying ``WITH``, arrays) to make a
read, a turn's claim and a write one round trip each; it sends the model signals the ORM
would have sent for the rows it writes that way, so a receiver fires on both databases.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from django.db import connections, models, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.fields.json import KT
from django.db.models.signals import post_save, pre_save

from poppy_django.models import AgentThread, Conversation, Event, EventType
from poppy_django.store.statements import Statements

ModelT = TypeVar("ModelT", bound=models.Model)
ChildT = TypeVar("ChildT", bound=models.Model)

#: A field's own converter: ``from_db_value(value, expression, connection)``, called with no
#: expression (the statements select plain columns; a JSON field's looks only for key lookups).
_Converter = Callable[[Any, Any, Any], Any]


@dataclass(frozen=True)
class Along:
    """Another table's write made in the statement of a conversation's write (PostgreSQL's
    data-modifying ``WITH`` clauses): its clauses, their parameters, the clause whose rows it
    wrote, and what is raised when it wrote none (the statement's transaction then rolls
    back with it)."""

    alias: str
    clauses: str
    params: list[Any]
    counted: str
    missing: Exception


class StoreBackend:
    """The store on one database alias, in forms every database runs."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.sql = Statements(connections[alias].ops.quote_name)

    @property
    def connection(self) -> BaseDatabaseWrapper:
        """This thread's connection to the alias."""
        return connections[self.alias]

    def answers(self) -> None:
        """One round trip to the database, raising when it cannot be made (the readiness
        probe's: a kept connection that the server has dropped fails here, not on a request)."""
        with self.connection.cursor() as cursor:
            cursor.execute(Statements.ROUND_TRIP)

    def serialize(self, name: str) -> None:
        """Hold ``name`` until the transaction ends: the transactions that serialize on one
        name run one at a time (a count then a write that must stay within a bound). Every
        database Django supports but PostgreSQL here runs one writing transaction at a time
        already (SQLite: the example's ``IMMEDIATE`` transactions), so nothing to do."""

    def bound_statements(self, seconds: float) -> None:
        """Cancel each statement of the current transaction that runs past ``seconds``, where
        the database can (PostgreSQL's ``statement_timeout``); elsewhere, nothing to do."""

    # -- reads ------------------------------------------------------------------------------

    def fetch(self, model: type[ModelT], sql: str, params: Sequence[Any]) -> list[ModelT]:
        """The rows ``sql`` returns as ``model`` instances, holding the columns it selected
        (the others deferred)."""
        return list(model._default_manager.raw(sql, params, using=self.alias))

    def snapshot(
        self,
        conversation_id: str,
        after: int,
        limit: int,
        fields: tuple[str, ...],
        event_fields: tuple[str, ...],
    ) -> tuple[Conversation | None, list[Event] | None]:
        """The conversation's ``fields`` and, where one statement reads both, its events
        after ``after`` (at most ``limit``, none past its ``last_seq``); None for the events:
        not read with the row."""
        found = self.fetch(Conversation, self.sql.conversation_by_id(fields), [conversation_id])
        return (found[0] if found else None), None

    def locked_conversation(self, conversation_id: str) -> Conversation | None:
        """The whole conversation row, locked until the transaction ends (SQLite has no row
        locks: its writers take the whole database)."""
        found = self.fetch(
            Conversation, self.sql.conversation_locked(row_locks=False), [conversation_id]
        )
        return found[0] if found else None

    def has_message(self, conversation_id: str, message_id: str) -> bool:
        with self.connection.cursor() as cursor:
            cursor.execute(self.sql.message_id_taken(), [conversation_id, message_id])
            return cursor.fetchone() is not None

    def reply_written_and_actions_approved(
        self, conversation_id: str, message_id: str, approved: str
    ) -> tuple[bool, bool]:
        with self.connection.cursor() as cursor:
            cursor.execute(
                self.sql.reply_written_and_actions_approved(),
                [conversation_id, message_id, conversation_id, approved],
            )
            written, actions = cursor.fetchone()
        return bool(written), bool(actions)

    def messages_and_approved(
        self, conversation_id: str, after: int, upto: int, role: str, approved: str
    ) -> tuple[list[Event], bool]:
        """The conversation's messages from ``role`` after ``after`` up to ``upto`` (every
        column, in ``seq`` order), and whether it has actions in the status ``approved``
        (staff approved, no worker ran them yet). Here two statements."""
        events = self.fetch(
            Event,
            self.sql.messages_in_range(),
            [conversation_id, after, upto, EventType.MESSAGE, role],
        )
        return events, bool(self.action_ids(conversation_id, approved))

    def action_ids(self, conversation_id: str, status: str) -> list[int]:
        """The ids of the conversation's actions in ``status``, oldest first."""
        with self.connection.cursor() as cursor:
            cursor.execute(self.sql.actions_in_status(), [conversation_id, status])
            return [row[0] for row in cursor.fetchall()]

    def thread_window(self, root_id: str, actor_id: str, limit: int) -> list[tuple[str, str]]:
        """The roles and texts of the actor's newest ``limit`` thread entries, newest first."""
        with self.connection.cursor() as cursor:
            cursor.execute(self.sql.thread_window(), [root_id, actor_id, limit])
            return [(role, text) for role, text in cursor.fetchall()]

    def messages_saying(
        self, messages: models.QuerySet[Event], text: str, config: str
    ) -> models.QuerySet[Event]:
        """``messages`` whose text holds ``text`` (a case-insensitive part of it; PostgreSQL:
        its words, stemmed by the text search ``config``, as a web search box reads them)."""
        return messages.filter(payload__message__text__icontains=text)

    def headlines(
        self, messages: models.QuerySet[Event], text: str, config: str, marks: tuple[str, str]
    ) -> list[tuple[str, str]]:
        """``(conversation id, headline)`` of each of ``messages`` saying ``text``, oldest
        first: the text around its first match, the match between ``marks``."""
        found = self.messages_saying(messages, text, config).order_by("conversation_id", "seq")
        rows = found.values_list("conversation_id", KT("payload__message__text"))
        return [(cid, marked(said or "", text, marks)) for cid, said in rows]

    # -- leases -----------------------------------------------------------------------------

    def take(self, owner_field: str, until_field: str, parameters: list[Any]) -> bool:
        """:meth:`Statements.lease_taken`: True when the row was given to the owner."""
        with self.connection.cursor() as cursor:
            cursor.execute(self.sql.lease_taken(owner_field, until_field), parameters)
            return cursor.rowcount == 1

    def take_and_lock(self, conversation_id: str, parameters: list[Any]) -> Conversation | None:
        """Take the conversation lease and, when taken, the row locked (None: not taken)."""
        if not self.take("lease_owner", "lease_expires_at", parameters):
            return None
        return self.locked_conversation(conversation_id)

    def renew(self, owners: list[str], until: Any) -> set[str]:
        """Renew until ``until`` every lease and agent thread the owners hold, in one
        statement; the owners whose conversation lease was renewed."""
        among = f"IN ({', '.join(['%s'] * len(owners))})"
        return self._renewed(among, list(owners), owners, until)

    def _renewed(self, among: str, values: list[Any], owners: list[str], until: Any) -> set[str]:
        field = cast(models.DateTimeField, Conversation._meta.get_field("lease_expires_at"))
        moment = field.get_db_prep_value(until, self.connection)
        parameters = [*values, moment, *values, moment, *values, *values]
        with self.connection.cursor() as cursor:
            cursor.execute(self.sql.leases_renewed(among), parameters)
            return {row[0] for row in cursor.fetchall()} & set(owners)

    # -- agent threads ------------------------------------------------------------------------

    def thread_made_alone(self, root_id: str, actor_id: str, now: Any) -> bool | None:
        """Make the actor's thread in a conversation in one statement, when no other actor
        has one there (no sign-in transcript goes with it) and the actor's does not exist:
        True when made, False when not (the caller makes it as the ORM does), None: this
        database has no such statement (the same)."""
        return None

    def thread_positions(self, root_id: str, actor_id: str, count: int, now: Any) -> Any:
        """Take ``count`` positions of the actor's thread (its row locked until the
        transaction ends): ``(thread id, new last position)``, or None: no such thread."""
        with self.connection.cursor() as cursor:
            cursor.execute(self.sql.thread_positions_taken(), [count, now, root_id, actor_id])
            return cursor.fetchone()

    def entries_along(
        self, root_id: str, actor_id: str, entries: Sequence[dict[str, str]], now: Any
    ) -> Along | None:
        """:meth:`append_entries` as a part of a conversation's write statement, raising
        ``AgentThread.DoesNotExist`` there when the thread is missing; None: this database
        writes them in statements of their own (:meth:`append_entries`)."""
        return None

    def append_entries(
        self,
        root_id: str,
        actor_id: str,
        entries: Sequence[dict[str, str]],
        now: Any,
        entry_model: type[models.Model],
    ) -> bool:
        """Take positions for ``entries`` in the actor's thread and write them there; False:
        no such thread. Here two statements: the positions, then the entries."""
        count = len(entries)
        row = self.thread_positions(root_id, actor_id, count, now)
        if row is None:
            return False
        thread_id, last = row
        entry_model._default_manager.bulk_create(
            entry_model(
                thread_id=thread_id, position=last - count + 1 + i, role=e["role"], text=e["text"]
            )
            for i, e in enumerate(entries)
        )
        return True

    # -- a write of a conversation's events, its row and rows added with them ----------------

    def write(
        self,
        conversation: Conversation,
        events: list[Event],
        fields: list[str],
        rows: list[models.Model] | None,
        along: Sequence[Along] = (),
    ) -> None:
        """Insert ``events`` (one ``INSERT``, no signals, as ``bulk_create``), write the
        conversation's ``fields`` and insert ``rows``, each saved as the ORM saves it
        (``pre_save``/``post_save`` sent). ``rows`` None: no one-statement form asked for.
        ``along``: other tables' writes in the same statement (only where
        :meth:`entries_along` gave them)."""
        if along:
            raise ValueError("this database writes no other table's rows along a write")
        if events:
            Event.objects.bulk_create(events)
        if fields:
            conversation.save(update_fields=fields)
        for row in rows or ():
            row.save(force_insert=True)


class PostgreSQLBackend(StoreBackend):
    """The store on PostgreSQL: a read, a claim, a lease's renewal and a write one round
    trip each; rows built straight from the driver's values."""

    def serialize(self, name: str) -> None:
        # An advisory lock on a 64-bit number made from the name, released at commit.
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).digest()
        number = int.from_bytes(digest[:8], "big", signed=True)
        with self.connection.cursor() as cursor:
            cursor.execute(Statements.ADVISORY_LOCK, [number])

    def bound_statements(self, seconds: float) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute(Statements.STATEMENT_TIMEOUT, [f"{seconds * 1000:.0f}ms"])

    def fetch(self, model: type[ModelT], sql: str, params: Sequence[Any]) -> list[ModelT]:
        # The driver hands every column as the value its field keeps, except where the field
        # converts it itself (``from_db_value``): the field's converter is the conversion.
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            columns = tuple(column.name for column in cursor.description)
            found = cursor.fetchall()
        return _built(model, self.alias, columns, found)

    def fetch_with_children(
        self, parent: type[ModelT], child: type[ChildT], sql: str, params: Sequence[Any]
    ) -> tuple[ModelT | None, list[ChildT]]:
        """One parent row and its children from a statement whose rows each hold the
        parent's columns and then one child's (all null where the parent has none, as a
        ``LEFT JOIN`` gives), both starting with their primary key (how the columns split):
        the parent (None without a row) and the children, each built as :meth:`fetch`."""
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            columns = tuple(column.name for column in cursor.description)
            found = cursor.fetchall()
        if not found:
            return None, []
        split = columns.index(_primary_key_column(child), 1)
        parents = _built(parent, self.alias, columns[:split], [found[0][:split]])
        rows = [row[split:] for row in found if row[split] is not None]
        return parents[0], _built(child, self.alias, columns[split:], rows)

    def snapshot(
        self,
        conversation_id: str,
        after: int,
        limit: int,
        fields: tuple[str, ...],
        event_fields: tuple[str, ...],
    ) -> tuple[Conversation | None, list[Event] | None]:
        """The row and the page's events in one statement: one snapshot, one round trip."""
        return self.fetch_with_children(
            Conversation,
            Event,
            self.sql.conversation_and_events(fields, event_fields),
            [after, limit, conversation_id],
        )

    def messages_saying(
        self, messages: models.QuerySet[Event], text: str, config: str
    ) -> models.QuerySet[Event]:
        # django.contrib.postgres imports the PostgreSQL driver: only this backend needs it.
        from django.contrib.postgres.search import SearchQuery, SearchVector

        words = SearchVector(KT("payload__message__text"), config=config)
        query = SearchQuery(text, search_type="websearch", config=config)
        return messages.annotate(words=words).filter(words=query)

    def headlines(
        self, messages: models.QuerySet[Event], text: str, config: str, marks: tuple[str, str]
    ) -> list[tuple[str, str]]:
        # django.contrib.postgres imports the PostgreSQL driver: only this backend needs it.
        from django.contrib.postgres.search import SearchHeadline, SearchQuery

        query = SearchQuery(text, search_type="websearch", config=config)
        found = self.messages_saying(messages, text, config).order_by("conversation_id", "seq")
        headline = SearchHeadline(
            KT("payload__message__text"),
            query,
            config=config,
            start_sel=marks[0],
            stop_sel=marks[1],
            max_words=18,
            min_words=6,
        )
        return list(found.annotate(headline=headline).values_list("conversation_id", "headline"))

    def locked_conversation(self, conversation_id: str) -> Conversation | None:
        found = self.fetch(
            Conversation, self.sql.conversation_locked(row_locks=True), [conversation_id]
        )
        return found[0] if found else None

    def take_and_lock(self, conversation_id: str, parameters: list[Any]) -> Conversation | None:
        """One statement: the lease's ``UPDATE`` returns the row it locked."""
        taken = self.fetch(Conversation, self.sql.lease_taken_and_locked(), parameters)
        return taken[0] if taken else None

    def renew(self, owners: list[str], until: Any) -> set[str]:
        return self._renewed("= ANY(%s)", [owners], owners, until)

    def messages_and_approved(
        self, conversation_id: str, after: int, upto: int, role: str, approved: str
    ) -> tuple[list[Event], bool]:
        """One statement (a claim's two reads after its lock, on one snapshot)."""
        with self.connection.cursor() as cursor:
            cursor.execute(
                self.sql.messages_and_approved(),
                [conversation_id, approved, conversation_id, after, upto, EventType.MESSAGE, role],
            )
            columns = tuple(column.name for column in cursor.description)
            found = cursor.fetchall()
        rows = [row[1:] for row in found if row[1] is not None]
        return _built(Event, self.alias, columns[1:], rows), bool(found[0][0])

    def thread_made_alone(self, root_id: str, actor_id: str, now: Any) -> bool | None:
        """One statement (no transaction of its own needed: nothing else is written with a
        thread made alone). None where a receiver listens for the thread's ``pre_save`` or
        ``post_save``: the ORM's save sends them."""
        if pre_save.has_listeners(AgentThread) or post_save.has_listeners(AgentThread):
            return None
        with self.connection.cursor() as cursor:
            cursor.execute(
                self.sql.thread_made_alone(), [root_id, actor_id, root_id, actor_id, now, now]
            )
            return cursor.fetchone() is not None

    def entries_along(
        self, root_id: str, actor_id: str, entries: Sequence[dict[str, str]], now: Any
    ) -> Along | None:
        missing = AgentThread.DoesNotExist(f"no thread of {actor_id!r} in {root_id}")
        params = _entries_parameters(root_id, actor_id, entries, now)
        return Along(
            self.alias, self.sql.thread_entries_clauses(), params, "thread_entries", missing
        )

    def append_entries(
        self,
        root_id: str,
        actor_id: str,
        entries: Sequence[dict[str, str]],
        now: Any,
        entry_model: type[models.Model],
    ) -> bool:
        """One statement: the positions taken and the entries written there."""
        with self.connection.cursor() as cursor:
            cursor.execute(
                self.sql.thread_entries_appended(),
                _entries_parameters(root_id, actor_id, entries, now),
            )
            return cursor.fetchone() is not None

    def write(
        self,
        conversation: Conversation,
        events: list[Event],
        fields: list[str],
        rows: list[models.Model] | None,
        along: Sequence[Along] = (),
    ) -> None:
        """With ``rows`` (a list, maybe empty): every part in one statement, one round trip
        (the events then get no ``pk`` back), ``along`` too. The conversation and each row
        get the ``pre_save`` and ``post_save`` the ORM's saves would have sent them."""
        if rows is None or not (rows or events or fields or along):
            super().write(conversation, events, fields, rows, along)
            return
        saved: list[tuple[models.Model, bool, frozenset[str] | None]] = (
            [(conversation, False, frozenset(fields))] if fields else []
        )
        saved += [(row, True, None) for row in rows]
        for instance, _, update_fields in saved:
            pre_save.send(
                sender=type(instance),
                instance=instance,
                raw=False,
                using=self.alias,
                update_fields=update_fields,
            )
        by_model: dict[type[models.Model], list[models.Model]] = {}
        for row in rows:
            by_model.setdefault(type(row), []).append(row)
        statement, params = self.sql.written_at_once(
            self.connection,
            [events, *by_model.values()],  # type: ignore[list-item]
            (conversation, fields) if fields else None,
            [(part.clauses, part.params, part.counted) for part in along],
        )
        with self.connection.cursor() as cursor:
            cursor.execute(statement, params)
            written = cursor.fetchone() if along else ()
        for part, count in zip(along, written or (), strict=True):
            if not count:
                raise part.missing
        for instance, created, update_fields in saved:
            instance._state.adding = False
            instance._state.db = self.alias
            post_save.send(
                sender=type(instance),
                instance=instance,
                created=created,
                update_fields=update_fields,
                raw=False,
                using=self.alias,
            )


def _entries_parameters(
    root_id: str, actor_id: str, entries: Sequence[dict[str, str]], now: Any
) -> list[Any]:
    """:meth:`Statements.thread_entries_clauses`' parameters."""
    count = len(entries)
    return [
        *(count, now, root_id, actor_id, count, now),
        list(range(1, count + 1)),
        [entry["role"] for entry in entries],
        [entry["text"] for entry in entries],
    ]


@functools.cache
def marked(said: str, text: str, marks: tuple[str, str], around: int = 60) -> str:
    """``said`` cut around the first case-insensitive ``text`` in it, which ``marks``
    enclose."""
    at = said.lower().find(text.lower())
    if at < 0:
        return said[: 2 * around]
    start, end = max(0, at - around), at + len(text)
    head = ("…" if start else "") + said[start:at]
    tail = said[end : end + around] + ("…" if end + around < len(said) else "")
    return f"{head}{marks[0]}{said[at:end]}{marks[1]}{tail}"


def for_alias(alias: str) -> StoreBackend:
    """The store backend of a database alias (one per alias, chosen by its vendor)."""
    return _backend(alias, connections[alias].vendor)


@functools.cache
def _backend(alias: str, vendor: str) -> StoreBackend:
    """Made once per alias and vendor, so that its statements are built once, not at every
    request (quoting their identifiers was about 50 calls a POST)."""
    return PostgreSQLBackend(alias) if vendor == "postgresql" else StoreBackend(alias)


def for_reading(model: type[models.Model]) -> StoreBackend:
    """The backend of the database ``model`` is read from (the router's)."""
    return for_alias(router.db_for_read(model))


def for_writing(model: type[models.Model]) -> StoreBackend:
    """The backend of the database ``model`` is written to (the router's)."""
    return for_alias(router.db_for_write(model))


# -- rows from a PostgreSQL cursor, as ``Model.from_db`` builds them ----------------------------


@functools.cache
def _plan(
    model: type[models.Model], columns: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[tuple[int, _Converter | None], ...]]:
    """The attribute names ``from_db`` takes, in the model's field order, and for each the
    index of its column in a row and the field's converter, if it has one.

    Django's ``RawQuerySet`` does this work again on every run (profiles showed it costing
    more than building the rows, docs/benchmarks.md); a statement's columns never change.
    """
    position = {column: index for index, column in enumerate(columns)}
    chosen = [
        (position[field.column], field)
        for field in model._meta.concrete_fields
        if field.column is not None and field.column in position
    ]
    if len(chosen) != len(columns):
        known = {field.column for field in model._meta.concrete_fields}
        raise ValueError(f"{model.__name__} has no columns {sorted(set(columns) - known)}")
    return (
        tuple(field.attname for _, field in chosen),
        tuple((index, getattr(field, "from_db_value", None)) for index, field in chosen),
    )


def _primary_key_column(model: type[models.Model]) -> str:
    pk = model._meta.pk
    assert pk is not None and pk.column is not None
    return pk.column


def _built(
    model: type[ModelT], alias: str, columns: tuple[str, ...], rows: Sequence[Sequence[Any]]
) -> list[ModelT]:
    """``rows`` of these columns as ``model`` instances (``from_db``, the fields' converters)."""
    connection = connections[alias]
    names, steps = _plan(model, columns)
    return [
        model.from_db(
            alias,
            names,
            [
                row[index] if convert is None else convert(row[index], None, connection)
                for index, convert in steps
            ],
        )
        for row in rows
    ]
