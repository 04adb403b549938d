"""Every write to a conversation takes its row lock first: concurrent writers are serialized,
so sequence numbers stay gap-free and no write is refused."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from poppy_django.models import Event
from tests.agents import PersonalAgent

pytestmark = pytest.mark.django_db(transaction=True)

WRITERS, EACH = 6, 5


def test_concurrent_messages_to_one_conversation_are_all_recorded_in_order(agent: PersonalAgent):
    conversation_id = agent.start(None, context={"n": "start"}).json()["conversation_id"]
    start = threading.Barrier(WRITERS)
    answers: list[int] = []

    def write(writer: int) -> None:
        same_user = PersonalAgent(agent.client_id, agent.user_id)
        start.wait()
        try:
            for n in range(EACH):
                context = {"n": f"{writer}-{n}"}
                answers.append(same_user.send(conversation_id, None, context=context).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(writer,)) for writer in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert answers == [202] * (WRITERS * EACH)
    seqs = list(
        Event.objects.filter(conversation_id=conversation_id)
        .order_by("seq")
        .values_list("seq", flat=True)
    )
    assert seqs == list(range(1, len(seqs) + 1))
    messages = Event.objects.filter(conversation_id=conversation_id, type="message")
    assert messages.count() == 1 + WRITERS * EACH
