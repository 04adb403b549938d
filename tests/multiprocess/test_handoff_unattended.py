"""A handoff no one can take, end to end: the example project as shipped (uvicorn, a Celery
worker, PostgreSQL, Redis), a personal agent reading the events over HTTP, staff signing in
to the admin and opening the desk as people do.

With no one on the desk, outside office hours, and past the maximum wait, the personal agent
is told why, and the Company Agent keeps the conversation and answers again.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agents import PersonalAgent, company_messages, unique
from tests.multiprocess.cluster import cluster

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]

DESK = "/admin/poppy_django/conversation/desk/"
PASSWORD = "a-desk-password-1"
#: The example project's wording of the default hooks' reasons (poppy_django.conf.DEFAULT_TEXTS).
NO_ONE = "No one can join right now: no one from our team is available."
AFTER_HOURS = "No one can join right now: our team is away now (office hours: mon-sun 00:00-24:00"
TOO_LONG = "No one can join right now: no one from our team could join in time."


def closed_today() -> str:
    """Office hours every day, but closed today and tomorrow (UTC): whenever the test runs."""
    today = datetime.now(UTC).date()
    return json.dumps(
        {
            "TIME_ZONE": "UTC",
            "HOURS": {"mon-sun": "00:00-24:00"},
            "CLOSED_DATES": [today.isoformat(), (today + timedelta(days=1)).isoformat()],
        }
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One deployment: its worker sweeps every second and gives a handoff back after 3 s; a
    second web process of it is configured with office hours that are closed now."""
    with cluster(Path(tmp_path_factory.mktemp("unattended"))) as running:
        running.env["POPPY_SWEEP_SECONDS"] = "1"
        running.env["POPPY_HANDOFF_MAX_WAIT_SECONDS"] = "3"
        for name in ("sam", "pat"):
            running.manage(
                "shell",
                "-c",
                "from django.contrib.auth.models import Permission, User\n"
                f"u = User.objects.create_user('{name}', password='{PASSWORD}', is_staff=True)\n"
                "u.user_permissions.add(Permission.objects.get(codename='handle_conversations'))",
            )
        running.worker("worker")
        web = running.web("web")
        after_hours = running.web("after-hours", env={"POPPY_OFFICE_HOURS": closed_today()})
        yield {"web": web, "after_hours": after_hours}


@contextlib.contextmanager
def open_the_desk(base: str, username: str) -> Iterator[httpx.Client]:
    """A staff member signs in to the admin and opens the desk's queue (a browser session)."""
    with httpx.Client(base_url=base, timeout=30, follow_redirects=True) as browser:
        login = browser.get(f"/admin/login/?next={DESK}")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)
        assert token, login.text[:500]
        queue = browser.post(
            "/admin/login/",
            data={
                "csrfmiddlewaretoken": token[1],
                "username": username,
                "password": PASSWORD,
                "next": DESK,
            },
            headers={"Referer": f"{base}/admin/login/"},
        )
        assert queue.status_code == 200 and str(queue.url).endswith(DESK), queue.url
        yield browser


def conversation_at(base: str) -> tuple[PersonalAgent, str]:
    """A personal agent's conversation, answered once by the Company Agent."""
    agent = PersonalAgent(user_id=unique("unattended")).at(base)
    started = agent.post("", agent.message("hello"))
    assert started.status_code == 201, started.text
    conversation_id = started.json()["conversation_id"]
    agent.events_until(conversation_id, lambda events: len(company_messages(events)) == 1)
    return agent, conversation_id


def handed_back(events: list[dict[str, Any]], told: str) -> bool:
    """The personal agent was told ``told`` and the Company Agent has the conversation."""
    said = [m.get("text", "") for m in company_messages(events)]
    last = events[-1] if events else {}
    return any(text.startswith(told) for text in said) and (
        last.get("type"),
        last.get("status"),
        last.get("responder"),
    ) == ("state", "idle", "agent")


def the_agent_answers_again(agent: PersonalAgent, conversation_id: str) -> None:
    before = len(company_messages(agent.all_events(conversation_id)))
    agent.send(conversation_id, "what are your hours?")
    agent.events_until(
        conversation_id, lambda events: len(company_messages(events)) == before + 1, timeout=60
    )
    assert company_messages(agent.all_events(conversation_id))[-1]["sender"] == "agent"


def test_with_no_one_on_the_desk_the_personal_agent_is_told_at_once(site) -> None:
    agent, conversation_id = conversation_at(site["web"])
    asked = agent.post(f"/{conversation_id}/handoff", {})
    assert asked.status_code == 202, asked.text
    assert (asked.json()["status"], asked.json()["responder"]) == ("idle", "agent")
    events = agent.events_until(conversation_id, lambda events: handed_back(events, NO_ONE))
    states = [(e["status"], e["responder"]) for e in events if e["type"] == "state"]
    assert states[-2:] == [("queued", "agent"), ("idle", "agent")]
    the_agent_answers_again(agent, conversation_id)


def test_outside_office_hours_the_personal_agent_is_told_the_hours(site) -> None:
    with open_the_desk(site["after_hours"], "sam"):  # someone is there, but the office is shut
        agent, conversation_id = conversation_at(site["after_hours"])
        asked = agent.post(f"/{conversation_id}/handoff", {})
        assert asked.json()["status"] == "idle", asked.text
        agent.events_until(conversation_id, lambda events: handed_back(events, AFTER_HOURS))
    the_agent_answers_again(agent, conversation_id)


def test_a_handoff_no_one_joins_goes_back_after_the_maximum_wait(site) -> None:
    with open_the_desk(site["web"], "pat") as desk:
        agent, conversation_id = conversation_at(site["web"])
        asked = agent.post(f"/{conversation_id}/handoff", {})
        assert asked.json()["status"] == "queued", asked.text
        # It waits on the desk, given to the one person there (the assign hook)...
        page = desk.get(f"{DESK}?status=waiting")
        assert conversation_id in page.text
        # The User writes meanwhile, for the person who does not come.
        assert agent.send(conversation_id, "is anyone there?").status_code == 202
        # Past 3 s the worker's sweep gives it back, says why, and the Company Agent answers
        # what was said while it waited.
        events = agent.events_until(
            conversation_id, lambda events: answered_after(events, TOO_LONG), timeout=60
        )
    states = [(e["status"], e["responder"]) for e in events if e["type"] == "state"]
    assert ("queued", "agent") in states and ("idle", "human") not in states
    the_agent_answers_again(agent, conversation_id)


def answered_after(events: list[dict[str, Any]], told: str) -> bool:
    """The personal agent was told ``told``, then the Company Agent answered, and is idle."""
    said = company_messages(events)
    at = next((i for i, m in enumerate(said) if m.get("text", "").startswith(told)), None)
    return (
        at is not None
        and any(m["sender"] == "agent" for m in said[at + 1 :])
        and handed_back(events, told)
    )
