"""Transactional tests empty PostgreSQL's tables with ``DELETE``, not ``TRUNCATE``.

A test that needs committed rows (turns run on other connections, a reader in another
thread) is a transactional test, and Django empties every table after it with ``flush``. On
PostgreSQL that is one ``TRUNCATE`` of every table, which gives each table and index new
files: ~1 s on this 2-core machine under load, against ~30 ms for a ``DELETE`` of each table's
handful of rows (measured with both in one test). Django's foreign keys are ``DEFERRABLE
INITIALLY DEFERRED``, and ``flush`` runs the statements in one transaction
(``execute_sql_flush``), so the deletes may run in any order; they go in one round trip.

The content types and permissions are kept: migrate made them, and the ``post_migrate``
signal Django sends after each flush would only look for them again (~50–150 ms a test
here), so after these deletes it is not sent. Everything else, the example shop's seeded
orders included, is emptied as before.

Test-only: the product never flushes (``manage.py flush`` is Django's, and this runs only in
the suite's process).
"""

from __future__ import annotations

from typing import Any

from django.core.management.commands import flush
from django.db.backends.postgresql.operations import DatabaseOperations

#: Rows ``migrate``'s ``post_migrate`` makes, and makes again after a flush if missing.
KEPT = frozenset({"django_content_type", "auth_permission"})

_truncating = DatabaseOperations.sql_flush
_emit_post_migrate = flush.emit_post_migrate_signal
#: Whether the last flush's statements were these deletes (post_migrate has nothing to make).
_kept = False


def _deleting(
    self: DatabaseOperations,
    style: Any,
    tables: list[str],
    *,
    reset_sequences: bool = False,
    allow_cascade: bool = False,
) -> list[str]:
    global _kept
    _kept = not (reset_sequences or allow_cascade)
    if not _kept:  # what only TRUNCATE does: Django's own way
        return _truncating(
            self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
        )
    emptied = [table for table in tables if table not in KEPT]
    if not emptied:
        return []
    deletes = "; ".join(f"DELETE FROM {self.quote_name(table)}" for table in emptied)
    return [f"SET CONSTRAINTS ALL DEFERRED; {deletes}"]  # one round trip


def _post_migrate_unless_kept(*args: Any, **kwargs: Any) -> None:
    if not _kept:
        _emit_post_migrate(*args, **kwargs)


def install() -> None:
    """Flush PostgreSQL test databases with deletes (this process only)."""
    DatabaseOperations.sql_flush = _deleting  # type: ignore[method-assign]
    flush.emit_post_migrate_signal = _post_migrate_unless_kept
