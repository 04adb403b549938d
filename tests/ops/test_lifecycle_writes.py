"""The conversation's lifecycle has one owner (docs/layout.md): no module but
``poppy_django/store/lifecycle.py`` writes a conversation's ``status``, ``responder`` or lease
fields, and no module outside ``store/`` saves a conversation row itself.

Read from the source, as ``tests/ops/test_raw_statements.py`` reads it for cursors, by the
reading ``scripts/lifecycle_counts.py`` does for docs/layout.md's figures (what counts as a
write is said there), so the test and the figures cannot disagree.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import poppy_django

PACKAGE = Path(poppy_django.__file__).resolve().parent
OWNER = "store/lifecycle.py"
SCRIPT = PACKAGE.parent / "scripts" / "lifecycle_counts.py"


def _reading():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("lifecycle_counts", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


reading = _reading()


def test_no_module_but_the_owner_writes_the_lifecycles_fields() -> None:
    outside = [
        f"{w.module}:{w.line} {w.how} ({', '.join(sorted(w.fields))})"
        for w in reading.writes(PACKAGE)
        if w.module != OWNER
    ]
    assert outside == []


def test_no_module_outside_the_store_saves_a_conversation_row() -> None:
    assert [f"{module}:{line} {call}" for module, line, call in reading.direct_saves(PACKAGE)] == []


def test_the_reading_sees_the_owners_writes() -> None:
    """The checker is not blind: the owner's transitions and leases are writes to it."""
    found = {field for w in reading.writes(PACKAGE) if w.module == OWNER for field in w.fields}
    assert found == set(reading.FIELDS)


@pytest.mark.parametrize(
    "source",
    [
        "def f(conversation):\n    conversation.status = 'idle'",
        "def f(c: Conversation):\n    c.status = 'idle'",
        "def f(row):\n    row.responder = 'human'",
        "def f(row):\n    row.lease_owner, row.lease_expires_at = None, None",
        "def f(conversation):\n    setattr(conversation, 'thread_owner', None)",
        "Conversation.objects.filter(pk=1).update(status='closed')",
        "def f(conversation):\n    conversation.save(update_fields=['status', 'updated_at'])",
        "def f(conversation):\n    event_log.save(conversation, 'thread_expires_at')",
        "def f(conversation):\n    event_log.set_state(conversation, responder='human')",
        "backends.for_writing(Conversation).take('lease_owner', 'lease_expires_at', [])",
        "def f(cid):\n    found = lock(cid)\n    found.status = 'idle'",
    ],
)
def test_each_form_of_a_write_is_seen(source: str) -> None:
    assert reading.writes_in_source(source, frozenset({"lock"})), source


@pytest.mark.parametrize(
    "source",
    [
        "def f(record):\n    record.status = 'failed'",  # an action's status
        "Conversation.objects.filter(status='queued', responder='agent')",
        "Q(responder='human') | Q(status='queued')",
        "def f(conversation):\n    return conversation.status == 'closed'",
        "def f(self):\n    self.responder = 'agent'",  # a client's own record of it
        "def f(conversation):\n    event_log.append(conversation, 'state', {'status': 'idle'})",
    ],
)
def test_reads_and_other_models_are_not_writes(source: str) -> None:
    assert reading.writes_in_source(source) == [], source
