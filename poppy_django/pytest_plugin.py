"""pytest-django fixtures for the test kit (docs/testing.md): in your ``conftest.py``,
``pytest_plugins = ["poppy_django.pytest_plugin"]``.

Django's ``TestCase`` classes need none of this (pytest-django runs them as they are, their
``async def`` methods too). These fixtures are for pytest functions:

- ``poppy_testing``: :func:`~poppy_django.testing.poppy_test_settings` for the test;
- ``personal_agent``: a signed-out :class:`~poppy_django.testing.PersonalAgentClient`, with
  pytest-django's ``db`` (the test's transaction, rolled back);
- ``async_personal_agent``: an :class:`~poppy_django.testing.AsyncPersonalAgentClient` for an
  ``async def`` test (``anyio`` or ``pytest-asyncio``), with ``transactional_db``: such a test
  runs its database work on asgiref's one thread for thread-sensitive calls, not on the
  thread holding pytest-django's transaction, so it commits and is flushed after the test.
  That thread's connections are closed when the test ends: none is left open for the test
  database's teardown (PostgreSQL refuses to drop a database in use);
- ``use_model``: ``use_model(model)`` has every turn of the test answered by ``model`` from
  then on, on whichever thread it runs (:func:`~poppy_django.testing.turn_model`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from django.db import connections

from poppy_django.testing import (
    AsyncPersonalAgentClient,
    PersonalAgentClient,
    poppy_test_settings,
    turn_model,
)


@pytest.fixture
def poppy_testing() -> Iterator[None]:
    """The test kit's settings (the fake verifier, turns answered by the test) for one test."""
    with poppy_test_settings():
        yield


@pytest.fixture
def personal_agent(db: None, poppy_testing: None) -> PersonalAgentClient:
    """A signed-out personal agent (``.signed_in(account, scopes)`` for the same User)."""
    return PersonalAgentClient()


@pytest.fixture
def async_personal_agent(
    transactional_db: None, poppy_testing: None
) -> Iterator[AsyncPersonalAgentClient]:
    """A signed-out personal agent for an ``async def`` test; no connection outlives it."""
    yield AsyncPersonalAgentClient()
    # The thread asgiref runs thread-sensitive calls on when no sync caller lends its own
    # (an event loop a pytest plugin started): its connections, opened by the test's requests.
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


@pytest.fixture
def use_model() -> Iterator[Callable[[Any], None]]:
    """``use_model(model)``: the test's turns use ``model`` from then on (a later call's
    model takes over), on the engine's threads too, until the test ends."""
    with ExitStack() as stack:
        yield lambda model: stack.enter_context(turn_model(model))
