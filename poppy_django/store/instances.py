"""Model instances from one of :mod:`~poppy_django.store.statements`' raw statements.

Every request runs one or two of those statements, and Django's ``RawQuerySet`` sets itself
up again on every run: it maps the cursor's columns onto the model, orders them for the
model's constructor and gathers each column's converters, which profiles showed costing more
than building the rows (docs/benchmarks.md). A statement's columns never change, so that
work is done here once per model and column list, and each row is built with the
documented ``Model.from_db``, as ``RawQuerySet`` builds it.

On PostgreSQL the database driver hands Django every column as the value its field keeps,
except where the field converts it itself (``from_db_value``: a JSON column, say), so a
field's own converter is the whole conversion. Other databases also convert in their
backend (SQLite's dates and booleans), so there the statement runs through ``RawQuerySet``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.db import connections, models, router

ModelT = TypeVar("ModelT", bound=models.Model)
ChildT = TypeVar("ChildT", bound=models.Model)

#: A field's own converter: ``from_db_value(value, expression, connection)``, called with no
#: expression (the statements select plain columns; a JSON field's looks only for key lookups).
_Converter = Callable[[Any, Any, Any], Any]


@functools.cache
def _plan(
    model: type[models.Model], columns: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[tuple[int, _Converter | None], ...]]:
    """The attribute names ``from_db`` takes, in the model's field order, and for each the
    index of its column in a row and the field's converter, if it has one."""
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


def vendor(model: type[models.Model]) -> str:
    """The vendor of the database ``model`` is read from (what decides the path here)."""
    return connections[router.db_for_read(model)].vendor


def fetch(
    model: type[ModelT], sql: str, params: Sequence[Any], *, using: str | None = None
) -> list[ModelT]:
    """The rows ``sql`` returns as ``model`` instances, holding the columns it selected
    (the others deferred). ``using``: the database alias, else the router's for reads."""
    alias = using or router.db_for_read(model)
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return list(model._default_manager.raw(sql, params, using=alias))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        columns = tuple(column.name for column in cursor.description)
        found = cursor.fetchall()
    return _built(model, alias, columns, found)


def fetch_with_children(
    parent: type[ModelT],
    child: type[ChildT],
    sql: str,
    params: Sequence[Any],
    *,
    using: str | None = None,
) -> tuple[ModelT | None, list[ChildT]]:
    """PostgreSQL only: one parent row and its children from a statement whose rows each
    hold the parent's columns and then one child's (all null where the parent has none, as a
    ``LEFT JOIN`` gives), both starting with their primary key (how the columns split): the
    parent (None without a row) and the children, each built as :func:`fetch` builds it."""
    alias = using or router.db_for_read(parent)
    connection = connections[alias]
    if connection.vendor != "postgresql":
        raise NotImplementedError("fetch_with_children() runs on PostgreSQL only")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        columns = tuple(column.name for column in cursor.description)
        found = cursor.fetchall()
    if not found:
        return None, []
    split = columns.index(_primary_key_column(child), 1)
    parents = _built(parent, alias, columns[:split], [found[0][:split]])
    rows = [row[split:] for row in found if row[split] is not None]
    return parents[0], _built(child, alias, columns[split:], rows)


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
