"""The ASGI wrapper speaks the lifespan protocol: uvicorn starts without its warning."""

from __future__ import annotations

from pathlib import Path

import pytest
from asgiref.sync import async_to_sync

from example_project.asgi import application
from tests.multiprocess.cluster import cluster


def test_the_application_acknowledges_startup_and_shutdown() -> None:
    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict] = []

    async def receive() -> dict:
        return incoming.pop(0)

    async def send(message: dict) -> None:
        sent.append(dict(message))

    async_to_sync(application)({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
    assert sent == [{"type": "lifespan.startup.complete"}, {"type": "lifespan.shutdown.complete"}]


@pytest.mark.multiprocess
def test_uvicorn_starts_the_example_project_without_the_lifespan_warning(tmp_path: Path) -> None:
    with cluster(tmp_path) as running:
        running.env.pop("REDIS_URL")  # one embedded process is enough to start uvicorn
        running.web("web")
        running.stop("web")
        log = running.log("web")
    assert "Application startup complete." in log, log
    assert "Application shutdown complete." in log, log
    assert "lifespan" not in log.lower(), log
