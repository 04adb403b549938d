"""A moment is logged and signalled only once it is durable: a rolled-back one never happened."""

from __future__ import annotations

import logging

import pytest
from django.db import transaction

from poppy_django import service, signals
from tests.agents import PersonalAgent

pytestmark = pytest.mark.django_db(transaction=True)


class RolledBack(Exception):
    pass


def _moments(caplog: pytest.LogCaptureFixture, name: str) -> list[dict]:
    return [r.poppy for r in caplog.records if getattr(r, "poppy", {}).get("moment") == name]


def test_a_rolled_back_moment_is_neither_logged_nor_signalled(agent: PersonalAgent, caplog):
    caplog.set_level(logging.INFO, logger="poppy_django")
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    received: list[dict] = []

    def record(sender, **kwargs) -> None:
        received.append(kwargs)

    signals.user_requested.connect(record)
    try:
        with pytest.raises(RolledBack), transaction.atomic():
            service.request_user(conversation_id, "rolled back", by="sam")
            assert _moments(caplog, "user_requested") == []  # not before the commit
            raise RolledBack
        assert _moments(caplog, "user_requested") == [] and received == []

        service.request_user(conversation_id, "kept", by="sam")
    finally:
        signals.user_requested.disconnect(record)
    (logged,) = _moments(caplog, "user_requested")
    assert logged["conversation_id"] == conversation_id
    assert [r["reason"] for r in received] == ["kept"]
