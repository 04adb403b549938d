"""The suite's fixtures: personal agents (tests/agents.py), the example shop's orders for the
tests that talk about them, and no turn left running into the next test.

Tests that need turns use ``transaction=True``: turns are dispatched only when the
message's transaction commits, and run on the in-process turn engine (its loop and database
threads), which must see committed rows. Each test waits for its turns to finish before the
database is flushed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from poppy_django.api import wire_errors
from poppy_django.api.throttling import PoppyRateThrottle
from poppy_django.engine.executors import ThreadExecutor, background_loops
from poppy_django.observe.streaks import Streaks
from tests import fast_flush
from tests.agents import PersonalAgent
from tests.waiting import Clock

fast_flush.install()

#: The test kit's pytest-django fixtures, as an adopter's conftest.py names them; the
#: suite's failing publish (tests/failing_publish.py).
pytest_plugins = ["poppy_django.pytest_plugin", "tests.failing_publish"]


@pytest.fixture
def agent() -> PersonalAgent:
    """A signed-out personal agent for a fresh User."""
    return PersonalAgent()


@pytest.fixture
def acct1() -> PersonalAgent:
    """A personal agent signed in to acct-1 with poppy:read and poppy:write."""
    return PersonalAgent(account_id="acct-1", scopes=("poppy:read", "poppy:write"))


@pytest.fixture
def shop_orders(db: None) -> None:
    """The example shop's seed orders (acct-1: A-1 shipped, A-2 processing; acct-2: B-1).

    The migration seeds them, but a transactional test's flush removes them for every test
    after it: a test that talks about orders asks for them.
    """
    from example_project.shop.models import Order
    from example_project.shop.seed import seed_orders

    seed_orders(Order)


@pytest.fixture
def throttle_clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The rate limit's clock (DRF's ``SimpleRateThrottle.timer``) held at the start of an
    hour: windows are aligned to the clock (``now // period``), so a test's burst is counted
    in one minute's and one hour's window however long it takes (a burst straddling an edge
    would be counted in two)."""
    clock = Clock(time.time() // 3600 * 3600 + 1)
    monkeypatch.setattr(PoppyRateThrottle, "timer", clock)
    return clock


@pytest.fixture(autouse=True, scope="session")
def _background_loops() -> Iterator[None]:
    """The suite tests the app as it runs outside tests: its recovery sweep starts with the
    engine (an adopter's test run starts none unless a test asks: tests/testing)."""
    with background_loops():
        yield


@pytest.fixture(autouse=True)
def _new_outage_streaks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a new process would: no outage streak told already (a request
    meeting one is logged once a streak, so an earlier test's would silence this one's)."""
    monkeypatch.setattr(wire_errors, "streaks", Streaks(wire_errors.logger, "requests reaching {}"))


@pytest.fixture(autouse=True)
def _finish_turns() -> Iterator[None]:
    """Turns still running would write into the next test's (flushed) database."""
    yield
    ThreadExecutor.shutdown(wait=True)


@pytest.fixture(autouse=True)
def _settings_as_found() -> Iterator[None]:
    """Each test leaves Django's settings as it found them. pytest-django's ``settings``
    restores a change by putting back the settings it changed, whole: changed inside an
    ``override_settings`` that a fixture leaves first, it puts back that override's, for
    every later test, with no ``setting_changed`` for what the override had changed (a
    Redis cache left so made the replay check of a later test block, and its read of the
    tail went to the database)."""
    from django.conf import settings

    found = settings._wrapped
    yield
    assert settings._wrapped is found, (
        "this test left Django's settings changed: an override_settings block (or poppy()) "
        "exited while pytest-django's settings fixture still held a change made inside it; "
        "make the change through one of them only"
    )
