"""The SQL a request runs, whatever thread runs it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db.backends.utils import CursorWrapper


class Queries:
    """The SQL run meanwhile by every thread (the view's ORM work runs in a worker thread,
    which ``django_assert_num_queries`` does not see) but the recovery sweep's, which runs on
    its own schedule whatever is read; ``after`` runs after each query."""

    def __init__(self) -> None:
        self.sql: list[str] = []
        #: Each statement with the thread that ran it.
        self.seen: list[tuple[int, str]] = []
        self.after: Callable[[str], None] | None = None
        self._lock = threading.Lock()
        self._made_on = threading.get_ident()

    def record(self, sql: str) -> None:
        if threading.current_thread().name == "poppy-recovery":
            return
        with self._lock:
            self.sql.append(sql)
            self.seen.append((threading.get_ident(), sql))
        if self.after is not None:
            self.after(sql)

    def clear(self) -> None:
        with self._lock:
            self.sql.clear()
            self.seen.clear()

    def of(self, table: str) -> list[str]:
        return [sql for sql in self.sql if f'FROM "{table}"' in sql]

    def of_this_thread(self) -> list[str]:
        """The statements of the thread that made this counter (the test's): where Django's
        test client runs a request's database work, so another test's background work
        still finishing elsewhere is not counted."""
        return [sql for thread, sql in self.seen if thread == self._made_on]

    def of_the_writer(self) -> list[str]:
        """The statements of the thread that last wrote events: a request's DRF cycle runs
        whole in one worker thread (the engine's sweeps, on other threads, are not its)."""
        writer = next(
            (thread for thread, sql in reversed(self.seen) if '"poppy_django_event"' in sql), None
        )
        return [sql for thread, sql in self.seen if thread == writer]


@pytest.fixture
def queries(monkeypatch: pytest.MonkeyPatch) -> Iterator[Queries]:
    seen = Queries()
    execute = CursorWrapper.execute

    def counted(self: CursorWrapper, sql: str, params: Any = None) -> Any:
        result = execute(self, sql, params)
        seen.record(sql)
        return result

    monkeypatch.setattr(CursorWrapper, "execute", counted)
    yield seen
