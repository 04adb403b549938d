"""A PostgreSQL ``CompanyStore`` for the SDK's own Company: the peer of issue 28.

A benchmark fixture, never a dependency of poppy-django: what a team that does not adopt
this app would write in an afternoon to make ``personal-agent-protocol`` 0.26's
``CompanyService`` durable. Written from the protocol's documentation
(``personal_agent_protocol.company.store.CompanyStore``: seven async methods over JSON
records by kind and key, each with a version and an optional expiry) and checked by the
SDK's own ``personal_agent_protocol.company.testing.check_store``
(``tests/bench/test_pg_store.py``, or ``python bench/pg_store.py --check DSN``).

One table, one autocommitted statement per call on a small pool of psycopg 3 async
connections. Versions come from one sequence, so every write gives a new version;
compare-and-set, create-if-absent and take-once are single statements whose row locks
settle races between callers and between replicas over one database. Expiry is judged by
the company's clock (passed in), as the memory store does: an expired row reads as absent
and is overwritten by ``create``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

TABLE = "pap_company_record"
SEQUENCE = "pap_company_record_version"

SCHEMA = f"""
CREATE SEQUENCE IF NOT EXISTS {SEQUENCE};
CREATE TABLE IF NOT EXISTS {TABLE} (
    kind text NOT NULL,
    key text NOT NULL,
    value jsonb NOT NULL,
    version bigint NOT NULL DEFAULT nextval('{SEQUENCE}'),
    expires_at timestamptz,
    PRIMARY KEY (kind, key)
)
"""

LIVE = "(expires_at IS NULL OR expires_at > %(now)s)"

GET = f"""
SELECT value, version, expires_at FROM {TABLE}
WHERE kind = %(kind)s AND key = %(key)s AND {LIVE}
"""
PUT = f"""
INSERT INTO {TABLE} (kind, key, value, expires_at)
VALUES (%(kind)s, %(key)s, %(value)s, %(expires)s)
ON CONFLICT (kind, key) DO UPDATE
SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at, version = nextval('{SEQUENCE}')
"""
# Written when absent, or over a row that has expired: the conflict's WHERE keeps a live row.
CREATE = f"""
INSERT INTO {TABLE} AS r (kind, key, value, expires_at)
VALUES (%(kind)s, %(key)s, %(value)s, %(expires)s)
ON CONFLICT (kind, key) DO UPDATE
SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at, version = nextval('{SEQUENCE}')
WHERE r.expires_at IS NOT NULL AND r.expires_at <= %(now)s
RETURNING 1
"""
REPLACE = f"""
UPDATE {TABLE} SET value = %(value)s, expires_at = %(expires)s, version = nextval('{SEQUENCE}')
WHERE kind = %(kind)s AND key = %(key)s AND version = %(version)s AND {LIVE}
RETURNING 1
"""
TAKE = f"DELETE FROM {TABLE} WHERE kind = %(kind)s AND key = %(key)s AND {LIVE} RETURNING value"
DELETE = f"DELETE FROM {TABLE} WHERE kind = %(kind)s AND key = %(key)s"
RECORDS = f"SELECT value, version, expires_at FROM {TABLE} WHERE kind = %(kind)s AND {LIVE}"


def system_now() -> datetime:
    return datetime.now(UTC)


class ConnectionPool:
    """Up to ``size`` autocommit connections, opened on demand and reused.

    The smallest pool that does the job (psycopg_pool is not a dependency of this
    project's environment): a connection that failed is dropped, not handed out again.
    """

    def __init__(self, dsn: str, size: int = 10) -> None:
        self.dsn = dsn
        self.size = size
        self.idle: asyncio.LifoQueue[psycopg.AsyncConnection[Any]] = asyncio.LifoQueue()
        self.opened = 0

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self.idle.empty() and self.opened < self.size:
            self.opened += 1
            try:
                conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
            except BaseException:
                self.opened -= 1
                raise
        else:
            conn = await self.idle.get()
        try:
            yield conn
        except BaseException:
            if conn.broken or conn.closed:
                self.opened -= 1
            else:
                self.idle.put_nowait(conn)
            raise
        else:
            self.idle.put_nowait(conn)

    async def close(self) -> None:
        while not self.idle.empty():
            await self.idle.get_nowait().close()
            self.opened -= 1


class PostgresCompanyStore:
    """``CompanyStore`` over one PostgreSQL table (see the module's docstring)."""

    def __init__(
        self, dsn: str, *, pool_size: int = 10, now: Callable[[], datetime] = system_now
    ) -> None:
        self.pool = ConnectionPool(dsn, pool_size)
        self.now = now

    async def create_schema(self) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(SCHEMA)  # type: ignore[arg-type]

    async def clear(self) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(f"TRUNCATE {TABLE}")  # type: ignore[arg-type]

    async def close(self) -> None:
        await self.pool.close()

    async def _one(self, statement: str, **params: Any) -> tuple[Any, ...] | None:
        params["now"] = self.now()
        async with self.pool.connection() as conn:
            cursor = await conn.execute(statement, params)  # type: ignore[arg-type]
            return await cursor.fetchone() if cursor.description else None

    @staticmethod
    def _record(row: tuple[Any, ...]) -> Any:
        from personal_agent_protocol.company.store import StoredRecord

        value, version, expires_at = row
        return StoredRecord(value, str(version), expires_at)

    async def get(self, kind: str, key: str) -> Any:
        row = await self._one(GET, kind=kind, key=key)
        return None if row is None else self._record(row)

    async def put(
        self, kind: str, key: str, value: dict[str, Any], *, expires_at: datetime | None = None
    ) -> None:
        await self._one(PUT, kind=kind, key=key, value=Jsonb(value), expires=expires_at)

    async def create(
        self, kind: str, key: str, value: dict[str, Any], *, expires_at: datetime | None = None
    ) -> bool:
        row = await self._one(CREATE, kind=kind, key=key, value=Jsonb(value), expires=expires_at)
        return row is not None

    async def replace(
        self,
        kind: str,
        key: str,
        version: str,
        value: dict[str, Any],
        *,
        expires_at: datetime | None = None,
    ) -> bool:
        if not version.isdigit():
            return False  # never a version this store gave
        row = await self._one(
            REPLACE,
            kind=kind,
            key=key,
            version=int(version),
            value=Jsonb(value),
            expires=expires_at,
        )
        return row is not None

    async def take(self, kind: str, key: str) -> dict[str, Any] | None:
        row = await self._one(TAKE, kind=kind, key=key)
        return None if row is None else row[0]  # type: ignore[no-any-return]

    async def delete(self, kind: str, key: str) -> None:
        await self._one(DELETE, kind=kind, key=key)

    async def records(self, kind: str) -> list[Any]:
        params = {"kind": kind, "now": self.now()}
        async with self.pool.connection() as conn:
            cursor = await conn.execute(RECORDS, params)  # type: ignore[arg-type]
            return [self._record(row) for row in await cursor.fetchall()]


async def check(dsn: str, store_type: type[PostgresCompanyStore] | None = None) -> None:
    """The SDK's own conformance kit on this store (or a subclass), each check on a fresh,
    empty table."""
    from personal_agent_protocol.company.testing import check_store

    stores: list[PostgresCompanyStore] = []

    async def fresh() -> PostgresCompanyStore:
        store = (store_type or PostgresCompanyStore)(dsn, pool_size=20)
        stores.append(store)
        await store.create_schema()
        await store.clear()
        return store

    try:
        await check_store(fresh, concurrency=16)
    finally:
        for store in stores:
            await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", metavar="DSN", required=True, help="run check_store on DSN")
    asyncio.run(check(parser.parse_args().check))
    print("check_store: passed")
