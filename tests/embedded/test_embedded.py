"""The embedded default (SQLite, in-process threads) has the same semantics as production."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from poppy_django import service
from poppy_django.agent.scripted import ScriptedModel
from poppy_django.desk import search
from poppy_django.engine import loop as engine
from poppy_django.engine.executors import ThreadExecutor
from poppy_django.engine.loop import run_turns
from poppy_django.engine.maintenance import reap
from poppy_django.models import Conversation, Status
from tests.agents import PersonalAgent, kinds, messages
from tests.model_signals import assert_a_messages_saves, saves
from tests.multiprocess.cluster import free_port
from tests.turn_control import dispatch_lost

pytestmark = [
    pytest.mark.embedded,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("shop_orders"),
]
ROOT = Path(__file__).resolve().parents[2]


def test_a_conversation_is_answered_on_sqlite_by_in_process_threads(agent: PersonalAgent):
    conversation_id = agent.start("hello").json()["conversation_id"]
    events = agent.settled(conversation_id)
    assert kinds(events) == [
        ("message", "user"),
        ("state", "working", "agent"),
        ("message", "company"),
        ("state", "idle", "agent"),
    ]
    assert messages(events)[1]["text"] == "You said: hello"


def test_a_message_sends_the_same_save_signals_as_on_postgresql(agent: PersonalAgent):
    """tests/reads/test_model_signals.py's assertions, on SQLite (the ORM's own saves)."""
    conversation_id = agent.start(None, context={"locale": "en-GB"}).json()["conversation_id"]
    with dispatch_lost(), saves() as seen:
        assert agent.send(conversation_id, "hello").status_code == 202
    assert_a_messages_saves(seen)


def test_concurrent_conversations_all_get_answered(acct1: PersonalAgent):
    started = [acct1.start(f"hello {n}").json()["conversation_id"] for n in range(8)]
    errors: list[BaseException] = []

    def follow_up(conversation_id: str) -> None:
        try:
            assert acct1.send(conversation_id, "my orders").status_code == 202
        except BaseException as exc:  # collected and re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=follow_up, args=(cid,)) for cid in started]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for conversation_id in started:
        events = acct1.events_until(
            conversation_id,
            lambda evs: (
                any(m.get("text", "").startswith("Your orders") for m in messages(evs))
                and evs[-1]["type"] == "state"
                and evs[-1]["status"] == "idle"
            ),
        )
        assert messages(events)[-1]["text"] == "Your orders: A-1 (shipped), A-2 (processing)."


def test_a_hundred_slow_turns_wait_for_their_model_at_once(monkeypatch):
    """The in-process executor holds a hundred waiting turns in flight on its engine's loop
    (``#slow`` awaits between its pieces), and answers every one."""
    # Each piece 2 s apart, so that the hundred claims are all made before the first turn ends.
    monkeypatch.setattr(ScriptedModel, "slow_interval", 2.0)
    # A hundred people (one start each: the start throttle is per personal agent and User),
    # recorded first, then dispatched at once.
    people = [PersonalAgent() for _ in range(100)]
    with dispatch_lost():
        started = [
            (pa, pa.start(f"#slow {n}").json()["conversation_id"]) for n, pa in enumerate(people)
        ]
    for _, conversation_id in started:
        ThreadExecutor.dispatch(conversation_id)
    for pa, conversation_id in started:
        events = pa.settled(conversation_id, timeout=120)
        assert messages(events)[-1]["text"] == "Let me check that for you."
    running = engine.current()
    assert running.counters.most_in_flight >= 100
    assert running.capacity >= 100  # the default TURNS_IN_FLIGHT


def _unanswered_and_leased(agent: PersonalAgent, owner: str, expires_in: float) -> str:
    """A conversation with a message nobody dispatched (its writer "died"): working, leased
    by ``owner`` until ``expires_in`` seconds from now."""
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    with dispatch_lost():
        agent.send(conversation_id, "are you there?")
    Conversation.objects.filter(pk=conversation_id).update(
        lease_owner=owner, lease_expires_at=timezone.now() + timedelta(seconds=expires_in)
    )
    return conversation_id


def test_a_turn_whose_owner_died_is_taken_up_again_once(agent: PersonalAgent):
    conversation_id = _unanswered_and_leased(agent, "dead-worker", expires_in=-1)
    assert reap() == [conversation_id]
    events = agent.settled(conversation_id)
    replies = [m for m in messages(events) if m["role"] == "company"]
    assert [r["text"] for r in replies] == ["You said: hello", "You said: are you there?"]
    assert Conversation.objects.get(pk=conversation_id).status == Status.IDLE
    assert reap() == []


def test_a_live_lease_keeps_another_worker_out(agent: PersonalAgent):
    """The lease's times compare the same on SQLite's text timestamps as on PostgreSQL."""
    conversation_id = _unanswered_and_leased(agent, "live-worker", expires_in=30)
    run_turns(conversation_id)  # another worker: the lease is not its to take
    conversation = Conversation.objects.get(pk=conversation_id)
    assert (conversation.lease_owner, conversation.status) == ("live-worker", Status.WORKING)
    replies = messages(agent.read(conversation_id).json()["events"])
    assert [m["text"] for m in replies if m["role"] == "company"] == ["You said: hello"]


def _files_under(directory: Path) -> set[Path]:
    return set(directory.rglob("*")) if directory.exists() else set()


@pytest.mark.django_db(transaction=False)
def test_make_demo_holds_a_whole_conversation_over_http(tmp_path):
    """As the README says: in a temporary directory it removes, nothing written into the
    checkout (its var/ included)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    checkout_before = _files_under(ROOT / "var")
    result = subprocess.run(
        [sys.executable, "-m", "example_project.demo", "--port", str(free_port())],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert f"SQLite in {tmp_path}/poppy-demo-" in out, out
    assert list(tmp_path.iterdir()) == []
    assert _files_under(ROOT / "var") == checkout_before
    for expected in (
        "We are open Monday to Friday",
        "authorization: sign_in_required (scope poppy:read)",
        "Your orders: A-1 (shipped), A-2 (processing).",
        "authorization: insufficient_scope (scope poppy:write)",
        "action cancel_order: succeeded",
        "component order_card",
        "closed (agent)",
        "Demo complete.",
    ):
        assert expected in out, out


@pytest.mark.django_db(transaction=False)
def test_the_demo_mints_a_token_for_a_key_whose_thumbprint_starts_with_a_dash(tmp_path):
    """One key in 64 has such a thumbprint; as a separate argument it read as an option."""
    from example_project import demo
    from poppy_django.client import DPoPKey

    key = next(key for key in iter(DPoPKey, None) if key.thumbprint.startswith("-"))
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")},
        "POPPY_VAR_DIR": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
    }
    token = demo.mint(env, key)
    assert token.count(".") == 2  # a JWT, not argparse's usage text


def test_readiness_makes_its_round_trip_to_sqlite(client):
    answer = client.get("/health/ready")
    body = answer.json()
    assert answer.status_code == 200, body
    assert list(body["checks"]) == ["database", "migrations", "cache"]
    assert client.post("/health/ready").status_code == 405


def test_the_desks_search_and_its_snippets_work_on_sqlite(agent: PersonalAgent) -> None:
    """Without PostgreSQL's full-text search: a part of a message's text, notes, tags."""
    said = agent.start("The Zipper of my tent broke").json()["conversation_id"]
    noted = agent.start("hello").json()["conversation_id"]
    for conversation_id in (said, noted):
        agent.settled(conversation_id)
    service.add_note(noted, "Offered a zipper repair kit", by="sam")
    service.tag(said, ["repair"], by="sam")
    rows = list(search.search(Conversation.objects.all(), "zipper").order_by("created_at"))
    assert [row.id for row in rows] == [said, noted]
    found = search.snippets(rows, "zipper")
    assert found[said].where == "Said" and ("Zipper", True) in found[said].parts
    assert found[noted].where == "Note by sam" and ("zipper", True) in found[noted].parts
    rows = list(search.search(Conversation.objects.all(), "REPAIR").order_by("created_at"))
    assert [row.id for row in rows] == [said, noted]  # its tag; the note's words
    found = search.snippets(rows, "REPAIR")
    assert (found[said].where, found[noted].where) == ("Tagged", "Note by sam")
