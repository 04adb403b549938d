"""Whether the database is migrated, told as the fix (``manage.py migrate``).

A project that forgot ``migrate`` fails at its first query with an ``OperationalError``
whose message the logs withhold; :func:`unmigrated_hint` recognises that case (a database
error while migrations are unapplied) for whoever meets it: the endpoint's answer and log
(:mod:`poppy_django.api.setup_problems`) and the recovery sweep.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor

MIGRATE = "run `python manage.py migrate`"


def unapplied_migrations(using: str = DEFAULT_DB_ALIAS) -> list[str]:
    """The migrations not applied to the database (``app.name``), or [] when it cannot say."""
    try:
        connection = connections[using]
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception:  # the database itself is away: that is another problem
        return []
    return [f"{migration.app_label}.{migration.name}" for migration, backwards in plan]


def unmigrated_hint(exc: BaseException) -> str | None:
    """For a database error raised while migrations are unapplied: the sentence saying so."""
    if not isinstance(exc, DatabaseError):
        return None
    missing = unapplied_migrations()
    if not missing:
        return None
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    return f"The database is not migrated ({shown} unapplied): {MIGRATE}."
