"""The engine's database threads give their pooled connection back when they have nothing
more to do, not after every job: back-to-back jobs (a busy worker's claims and commits) share
one checkout of the pool, and an idle thread holds none."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from poppy_django.engine import database_threads
from poppy_django.engine.database_threads import DatabaseThreads
from tests.waiting import eventually


class Jobs:
    """The jobs run so far, and each give-back of the pooled connections (the real one still
    runs) with the jobs run by then."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.give_backs: list[str] = []

    def job(self, name: str, wait: threading.Event | None = None) -> Callable[[], str]:
        def run() -> str:
            if wait is not None:
                assert wait.wait(10)
            self.ran.append(name)
            return name

        return run


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> Jobs:
    seen = Jobs()
    give_back = database_threads.give_back_pooled_connections

    def recorded() -> None:
        seen.give_backs.append(",".join(seen.ran))
        give_back()

    monkeypatch.setattr(database_threads, "give_back_pooled_connections", recorded)
    return seen


def test_jobs_waiting_share_one_checkout(jobs: Jobs) -> None:
    threads = DatabaseThreads(1, "test-db")
    try:
        release = threading.Event()
        first = threads.submit(jobs.job("a", release))
        rest = [threads.submit(jobs.job(name)) for name in ("b", "c")]
        release.set()
        assert [f.result(10) for f in (first, *rest)] == ["a", "b", "c"]
        # Given back once, after the last job, not after a and b (which had a job waiting).
        eventually(lambda: jobs.give_backs == ["a,b,c"], what="one give-back after the last job")
        assert threads.submit(jobs.job("d")).result(10) == "d"
        eventually(lambda: jobs.give_backs == ["a,b,c", "a,b,c,d"], what="a lone job's give-back")
    finally:
        threads.stop()


def test_a_failing_job_with_work_waiting_still_gives_back_once_idle(jobs: Jobs) -> None:
    threads = DatabaseThreads(1, "test-db")
    try:
        release = threading.Event()

        def failing() -> None:
            assert release.wait(10)
            raise RuntimeError("the job failed")

        failed = threads.submit(failing)
        after = threads.submit(jobs.job("b"))
        release.set()
        with pytest.raises(RuntimeError):
            failed.result(10)
        assert after.result(10) == "b"
        eventually(lambda: jobs.give_backs == ["b"], what="the give-back once idle")
    finally:
        threads.stop()
