"""Staff's private notes (and take-overs, assignments, transfers) never reach the wire: not a
JSON read, a long-poll, an SSE stream, nor any module that answers a personal agent (MCP,
operations, feedback) or exports the log."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest
from django.core.management import call_command

import poppy_django
from poppy_django import service
from tests.agents import PersonalAgent
from tests.desk.conftest import make_user
from tests.staff import company_message
from tests.stream.asgi import get
from tests.waiting import eventually
from tests.wire.wire_support import quiet_start

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "NOTE-0f3c: the customer was rude last week, refund max 20"
HANDED = "TRANSFER-9a1b: Pat knows the tent models"

PACKAGE = Path(poppy_django.__file__).parent
#: The only modules that may read the desk's log: the model, the company's service, the desk
#: (staff only, behind its permission) and the admin. ``DESK_NEWS`` goes to the desk channel.
MAY_READ = {
    "models.py",
    # The company service: its package's names, the desk's log, and the calls that write it.
    "service/__init__.py",
    "service/desk_log.py",
    "service/holding.py",
    "service/assignment.py",
    # Following up a missed customer and rerouting a handoff: the desk's own records of them.
    "service/missed.py",
    "service/rerouting.py",
    "admin.py",
    "fanout/publishing.py",
    "fanout/__init__.py",
}
NAMES = {"DeskEvent", "desk_events", "DeskEventKind", "DESK_NEWS", "desk_news_on_commit"}


def with_desk_events(agent: PersonalAgent) -> str:
    make_user(name="sam")
    make_user(name="pat")
    conversation_id = quiet_start(agent)
    service.human_joined(conversation_id, by="sam")
    service.add_note(conversation_id, SECRET, by="sam")
    service.transfer(conversation_id, "pat", by="sam", note=HANDED)
    service.take_over(conversation_id, by="sam")
    return conversation_id


def test_a_json_read_carries_no_note(agent: PersonalAgent) -> None:
    conversation_id = with_desk_events(agent)
    raw = agent.read(conversation_id).content.decode()
    for hidden in (SECRET, HANDED, "took_over", "transferred", "pat"):
        assert hidden not in raw, hidden


def test_a_note_wakes_no_long_poll_and_is_not_in_it(agent: PersonalAgent) -> None:
    conversation_id = with_desk_events(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    writer = threading.Timer(0.5, lambda: service.add_note(conversation_id, SECRET, by="sam"))
    writer.start()
    try:
        page = agent.read(conversation_id, f"?cursor={cursor}&wait=3")
    finally:
        writer.join()
    assert page.json()["events"] == [] and SECRET not in page.content.decode()


def test_a_stream_carries_no_note(agent: PersonalAgent) -> None:
    conversation_id = with_desk_events(agent)
    cursor = agent.read(conversation_id).json()["cursor"]
    opened = threading.Event()

    def write() -> None:
        eventually(opened.is_set, what="the stream to open")
        service.add_note(conversation_id, SECRET, by="sam")
        service.transfer(conversation_id, "pat", by="sam", note=HANDED)
        company_message(conversation_id, "the end")

    writer = threading.Thread(target=write)
    writer.start()
    try:
        streamed = get(
            f"/poppy/conversations/{conversation_id}/events?cursor={cursor}",
            {
                "authorization": agent.headers()["HTTP_AUTHORIZATION"],
                "accept": "text/event-stream",
            },
            hang_up=lambda body: b"the end" in body,
            opened=opened,
            timeout=20,
        )
    finally:
        writer.join()
    body = streamed.body.decode()
    assert "the end" in body
    for hidden in (SECRET, HANDED, "transferred"):
        assert hidden not in body, hidden


def test_an_export_of_the_log_carries_no_note(agent: PersonalAgent, tmp_path: Path) -> None:
    conversation_id = with_desk_events(agent)
    dump = tmp_path / "log.json"
    call_command(
        "dumpdata",
        "poppy_django.conversation",
        "poppy_django.event",
        "poppy_django.messagereceipt",
        output=str(dump),
    )
    exported = dump.read_text()
    assert conversation_id in exported
    assert SECRET not in exported and HANDED not in exported


def names_used(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    found |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found |= {alias.name for alias in node.names}
    return found


def test_only_the_desk_and_the_company_service_read_the_desks_log() -> None:
    """What answers a personal agent (the endpoint, streams, MCP, operations, feedback, the
    authority) never names the desk's log: no future read there can carry a note."""
    readers = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "migrations" not in path.parts and NAMES & names_used(path)
    )
    outside = [
        reader for reader in readers if reader not in MAY_READ and not reader.startswith("desk/")
    ]
    assert outside == [], outside
    assert "service/desk_log.py" in readers  # the test looks where it should
