"""psycopg_pool's warnings with the database away (issue 50): the pool tries to connect
again and again and warns at every attempt; the app's filter on its logger lets the first
through and holds the same kind back, and the first connection had afterwards says the
database connects again. The pool here is real, pointed at a port where nothing listens."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from django.db.backends.signals import connection_created
from psycopg_pool import ConnectionPool

from poppy_django.observe.pool_warnings import POOL_LOGGER, PoolWarnings, install
from tests.multiprocess.cluster import free_port
from tests.waiting import eventually


def test_the_pools_warnings_once_a_streak_then_connects_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    warnings = PoolWarnings()  # a fresh streak, in place of the process's own
    pool_logger = logging.getLogger(POOL_LOGGER)
    installed = install()
    pool_logger.removeFilter(installed)
    pool_logger.addFilter(warnings)
    connection_created.connect(warnings.connected, dispatch_uid="test_pool_warnings")
    try:
        with caplog.at_level(logging.INFO):
            url = f"postgresql://postgres@127.0.0.1:{free_port()}/x"
            # min_size 1: the pool keeps trying (backing off 1 s, 2 s) and warns each time.
            with ConnectionPool(url, name="flaky", min_size=1, reconnect_timeout=60) as pool:
                eventually(
                    lambda: pool.get_stats().get("connections_errors", 0) >= 3,
                    what="three failed attempts",
                )
                pool.close()
            # Django connects through another pool: that streak goes on.
            connection_created.send(sender=None, connection=SimpleNamespace(pool=None))
            # A connection of this pool again (Django's signal at a pooled checkout).
            connection_created.send(sender=None, connection=SimpleNamespace(pool=pool))
    finally:
        pool_logger.removeFilter(warnings)
        pool_logger.addFilter(installed)
        connection_created.disconnect(dispatch_uid="test_pool_warnings")
    passed = [r.getMessage() for r in caplog.records if r.name == POOL_LOGGER]
    assert len(passed) == 1, passed
    assert passed[0].startswith("error connecting in ") and "Connection refused" in passed[0]
    (again,) = [r for r in caplog.records if r.name == "poppy_django.database"]
    assert again.levelname == "INFO"
    assert again.getMessage().startswith("poppy: the database connects again, after ")
    assert "failed connection attempts of flaky" in again.getMessage()


def test_the_filter_is_on_the_pools_logger_once_the_app_loads() -> None:
    filters = logging.getLogger(POOL_LOGGER).filters
    assert sum(isinstance(f, PoolWarnings) for f in filters) == 1
