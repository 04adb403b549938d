"""Behind PgBouncer in transaction pooling mode (docs/deployment.md, "Behind PgBouncer").

The PgBouncer here is strict: it resets every server connection after every transaction
(``DISCARD ALL``), so whatever leans on a session across transactions fails at once rather
than under load. Through it: the example project as shipped (``DATABASE_TRANSACTION_POOLING=1``)
with real uvicorn, Celery workers and Redis — conversations, an action under row locks, a
dead worker's turn taken up by the ``SKIP LOCKED`` sweep, pruning — on fewer PostgreSQL
connections than client processes; and the driver settings it relies on, next to the two that
break there (psycopg's prepared statements, Django's server-side cursors).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.db import connection, connections
from django.db.backends.postgresql.base import DatabaseWrapper

from tests import pgbouncer
from tests.agents import PersonalAgent, company_messages
from tests.multiprocess.cluster import Cluster

pytestmark = pytest.mark.multiprocess


@pytest.fixture
def bouncer() -> Iterator[pgbouncer.PgBouncer]:
    with pgbouncer.running(pool_size=3, strict=True) as running:
        yield running


def _settled(events: list[dict[str, Any]]) -> bool:
    return bool(events) and events[-1]["type"] == "state" and events[-1]["status"] == "idle"


# -- the driver ------------------------------------------------------------------------------


def _through(bouncer: pgbouncer.PgBouncer, **overrides: Any) -> psycopg.Connection[Any]:
    """A connection made with the psycopg parameters Django uses, through PgBouncer."""
    params = {**connection.get_connection_params(), **overrides}
    params.update(host="127.0.0.1", port=bouncer.port, dbname="postgres")
    return psycopg.connect(**params, autocommit=True)


def test_djangos_psycopg_parameters_never_prepare_a_statement(bouncer) -> None:
    with _through(bouncer) as conn:
        for value in range(10):  # psycopg prepares after 5 executions when allowed to
            assert conn.execute("SELECT %s::int + 1", (value,)).fetchone() == (value + 1,)


def test_psycopgs_prepared_statements_break_there(bouncer) -> None:
    """Why the defaults must stay (client-side binding, no prepare threshold): with
    ``OPTIONS = {"server_side_binding": True, "prepare_threshold": ...}`` a prepared statement
    does not outlive its transaction."""
    conn = _through(bouncer, prepare_threshold=0, cursor_factory=psycopg.Cursor)
    with conn, pytest.raises(psycopg.errors.InvalidSqlStatementName):
        for value in range(3):
            conn.execute("SELECT %s::int + 1", (value,))


@pytest.mark.django_db
@pytest.mark.parametrize("disabled", [True, False])
def test_server_side_cursors_must_be_disabled(bouncer, disabled: bool) -> None:
    """``.iterator()`` (the prune uses it) reads through a WITH HOLD cursor unless disabled."""
    connections["pgbouncer"] = DatabaseWrapper(
        {
            **settings.DATABASES["default"],
            "HOST": "127.0.0.1",
            "PORT": bouncer.port,
            "DISABLE_SERVER_SIDE_CURSORS": disabled,
        },
        alias="pgbouncer",
    )
    try:
        iterated = ContentType.objects.using("pgbouncer").values_list("pk", flat=True).iterator()
        if disabled:
            assert len(list(iterated)) == ContentType.objects.count()
        else:
            with pytest.raises(Exception, match="does not exist"):
                list(iterated)
    finally:
        connections["pgbouncer"].close()
        del connections["pgbouncer"]


# -- the example project ---------------------------------------------------------------------


def test_the_example_project_runs_behind_pgbouncer(tmp_path: Path, bouncer) -> None:
    mp = Cluster(tmp_path, env={"DATABASE_TRANSACTION_POOLING": "1", "POPPY_SWEEP_SECONDS": "1"})
    mp.env["DATABASE_URL"] = bouncer.url(mp.name)
    mp.create(from_template=False)  # migrations through PgBouncer too
    try:
        _exercise(mp, bouncer)
    finally:
        mp.destroy()


def _exercise(mp: Cluster, bouncer: pgbouncer.PgBouncer) -> None:
    web = mp.web("web")
    mp.worker("worker-1")
    mp.worker("worker-2")

    # Many conversations at once: event-log row locks, leases' conditional UPDATEs.
    agents = [PersonalAgent() for _ in range(8)]
    started = [
        pa.at(web).post("", pa.message(f"hello {index}")).json()["conversation_id"]
        for index, pa in enumerate(agents)
    ]
    for index, (pa, conversation_id) in enumerate(zip(agents, started, strict=True)):
        (reply,) = company_messages(pa.at(web).events_until(conversation_id, _settled, timeout=60))
        assert reply["text"] == f"You said: hello {index}"

    # An action: the order and the action record under SELECT ... FOR UPDATE.
    account = PersonalAgent(account_id="acct-1", scopes=("poppy:read", "poppy:write"))
    cancel = account.at(web).post("", account.message("cancel A-2")).json()["conversation_id"]
    (done,) = company_messages(account.at(web).events_until(cancel, _settled, timeout=60))
    assert done["data"]["actions"][0]["status"] == "succeeded"

    # A worker killed mid-turn: the other's sweep claims the turn (FOR UPDATE SKIP LOCKED).
    pa = PersonalAgent()
    slow = pa.at(web).post("", pa.message("#slow please")).json()["conversation_id"]
    stream = pa.at(web).stream(slow)
    next(data for name, _, data in stream if name == "text-delta")
    stream.close()
    mp.kill("worker-1")  # whichever of the two runs it
    mp.kill("worker-2")
    mp.worker("worker-3")
    (taken_up,) = company_messages(pa.at(web).events_until(slow, _settled, timeout=90))
    assert taken_up["text"] == "Let me check that for you."

    # Pruning iterates with .iterator(): no server-side cursor behind PgBouncer.
    assert "deleted" in mp.manage("poppy_prune_events", "--older-than", "0s")

    # Client processes (web, workers, the prune) on at most the pool's connections.
    ((held,),) = mp.pg(f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{mp.name}'")
    assert held <= bouncer.pool_size
