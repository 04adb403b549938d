"""Hostile input at the desk (issue 51: R9), against the example project in production mode
(uvicorn, a Celery worker, PostgreSQL, Redis; staff signed in to the admin as people are).

The desk's parameters and ids are validated: ``?before=²``, a 5,000-digit ``before`` and a
conversation id holding U+0000 are a 400 or a 404, never a 500, while the pages they would
have shown still answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents import PersonalAgent, company_messages, unique
from tests.multiprocess.cluster import Cluster, cluster
from tests.multiprocess.test_handoff_unattended import DESK, PASSWORD, open_the_desk

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]
STAFF = "sam"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    """One deployment (its web process logs every request), with a staff member of the desk."""
    with cluster(Path(tmp_path_factory.mktemp("hostile-desk"))) as running:
        running.manage(
            "shell",
            "-c",
            "from django.contrib.auth.models import Permission, User\n"
            f"u = User.objects.create_user({STAFF!r}, password={PASSWORD!r}, is_staff=True)\n"
            "u.user_permissions.add(Permission.objects.get(codename='handle_conversations'))",
        )
        running.worker("worker")
        web = running.web("web", access_log=True)
        yield running, web
        log = running.log("web")
    assert '" 500' not in log and "Traceback" not in log, log


def answered_conversation(base: str) -> str:
    agent = PersonalAgent(user_id=unique("hostile-desk")).at(base)
    started = agent.post("", agent.message("hello"))
    assert started.status_code == 201, started.text
    conversation_id = str(started.json()["conversation_id"])
    agent.events_until(conversation_id, lambda events: len(company_messages(events)) == 1)
    return conversation_id


def test_the_desks_parameters_and_ids_are_a_400_or_a_404(site: tuple[Cluster, str]) -> None:
    _, web = site
    conversation_id = answered_conversation(web)
    page = f"{DESK}{conversation_id}/"
    with open_the_desk(web, STAFF) as desk:
        assert desk.get(page, params={"before": "3"}).status_code == 200
        for before in ("²", "٣", "9" * 5000):
            assert desk.get(page, params={"before": before}).status_code == 400, before
        for tail in ("", "events.json", "canned.json", "stream/"):
            assert desk.get(f"{DESK}cnv_a%00b/{tail}").status_code == 404, tail
        headers = {"X-CSRFToken": desk.cookies["csrftoken"], "Referer": f"{web}{page}"}
        reply = desk.post(f"{DESK}cnv_a%00b/action/reply/", json={}, headers=headers)
        assert reply.status_code == 404
        assert desk.get(f"{page}events.json", params={"after": "9" * 5000}).status_code == 400
