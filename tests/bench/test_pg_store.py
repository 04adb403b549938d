"""The issue-28 peer's PostgreSQL ``CompanyStore`` (bench/pg_store.py) keeps the SDK's own
store contract: ``personal_agent_protocol.company.testing.check_store`` passes on it.

A fixture of the benchmarks, not of the package: checked here so a bench run never measures
a peer that cuts a corner the contract forbids (a racy take, a create over a live record).
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from django.db import connection

pytest.importorskip("personal_agent_protocol.company.testing")

from bench import pg_store  # noqa: E402


def dsn() -> str:
    settings = connection.settings_dict
    return psycopg.conninfo.make_conninfo(
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"] or 5432,
        user=settings["USER"],
        password=settings["PASSWORD"] or None,
        dbname=settings["NAME"],
    )


def drop() -> None:
    with psycopg.connect(dsn(), autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {pg_store.TABLE}")  # type: ignore[arg-type]
        conn.execute(f"DROP SEQUENCE IF EXISTS {pg_store.SEQUENCE}")  # type: ignore[arg-type]


@pytest.mark.django_db
def test_the_postgresql_peer_passes_the_sdks_check_store() -> None:
    try:
        asyncio.run(pg_store.check(dsn()))
    finally:
        drop()


@pytest.mark.django_db
def test_a_broken_take_is_caught_by_check_store() -> None:
    """The check can fail: a take that does not delete breaks "take once"."""
    from personal_agent_protocol.company.testing import StoreConformanceError

    class LeakyTake(pg_store.PostgresCompanyStore):
        async def take(self, kind: str, key: str):  # type: ignore[no-untyped-def]
            entry = await self.get(kind, key)
            return None if entry is None else entry.value

    try:
        with pytest.raises(StoreConformanceError, match="take"):
            asyncio.run(pg_store.check(dsn(), LeakyTake))
    finally:
        drop()
