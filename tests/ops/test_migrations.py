"""Upgrading a database: agent threads' ``history`` lists become entry rows, and back."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("poppy_django", "0004_turn_bounds")
HISTORY = [
    {"role": "system", "text": "What was said before:\nUser: hi"},
    {"role": "user", "text": "my orders"},
    {"role": "assistant", "text": "Your orders: A-1 (shipped)."},
]


def migrate_to(target: tuple[str, str]) -> Apps:
    """The database migrated to ``target``; the models as they were there."""
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    executor.loader.build_graph()
    return executor.loader.project_state([target]).apps


def latest() -> tuple[str, str]:
    executor = MigrationExecutor(connection)
    (leaf,) = [node for node in executor.loader.graph.leaf_nodes() if node[0] == "poppy_django"]
    return leaf


def thread_with_history(apps: Apps, history: list[dict[str, Any]]) -> int:
    conversation = apps.get_model("poppy_django", "Conversation").objects.create(
        client_id="https://pa.example/client", user_id="u-1", agent_name="support"
    )
    thread = apps.get_model("poppy_django", "AgentThread").objects.create(
        conversation=conversation, actor_id="acct-1", history=history
    )
    return int(thread.pk)


def test_history_lists_become_entries_in_order_and_go_back_on_reverse() -> None:
    newest = latest()
    try:
        old = migrate_to(BEFORE)
        thread_id = thread_with_history(old, HISTORY)
        empty_id = thread_with_history(old, [])

        new = migrate_to(newest)
        entries = new.get_model("poppy_django", "AgentThreadEntry").objects
        rows = entries.filter(thread_id=thread_id).order_by("position")
        assert [(e.position, e.role, e.text) for e in rows] == [
            (position, entry["role"], entry["text"])
            for position, entry in enumerate(HISTORY, start=1)
        ]
        threads = new.get_model("poppy_django", "AgentThread").objects
        assert threads.get(pk=thread_id).last_position == len(HISTORY)
        assert threads.get(pk=empty_id).last_position == 0
        assert not entries.filter(thread_id=empty_id).exists()

        back = migrate_to(BEFORE)
        assert back.get_model("poppy_django", "AgentThread").objects.get(pk=thread_id).history == (
            HISTORY
        )
    finally:
        # Every app's newest, not only this app's: going back unapplied the migrations of
        # other apps that depend on it (the authority's), which the tests after this need.
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
