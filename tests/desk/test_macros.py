"""Macros: a reply, tags, a teammate and what then, in one step through the service API; all
their steps happen, or none."""

from __future__ import annotations

import pytest
from django.test import Client

from poppy_django import service
from poppy_django.admin import MacroForm
from poppy_django.models import Conversation, DeskEvent, Macro, MacroThen, Tag
from tests.agents import PersonalAgent, messages
from tests.desk.conftest import act, on_shift, queued

pytestmark = pytest.mark.django_db(transaction=True)


def macro(shortcut: str = "refund-sent", **fields: object) -> Macro:
    tags = fields.pop("tags", ["refund"])
    made = Macro.objects.create(
        shortcut=shortcut,
        title=fields.pop("title", "Refund sent"),
        reply=fields.pop("reply", "Hi {name|there}, your refund is on its way."),
        **fields,
    )
    for name in tags:  # type: ignore[union-attr]
        made.tags.add(Tag.objects.get_or_create(name=name)[0])
    return made


def test_a_macro_replies_tags_and_closes_in_one_step(desk: Client, agent: PersonalAgent) -> None:
    macro(then=MacroThen.CLOSE)
    conversation_id = queued(agent, "where is my refund?")
    answer = act(
        desk,
        conversation_id,
        "macro",
        macro="refund-sent",
        seen=service.get(conversation_id).last_seq,
    )
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["conversation"]["closed"] and body["conversation"]["tags"] == ["refund"]
    said = messages(agent.settled(conversation_id))
    assert said[-1]["text"] == "Hi there, your refund is on its way."
    assert said[-1]["sender"] == "human"
    kinds = [(e.kind, e.other) for e in DeskEvent.objects.filter(conversation_id=conversation_id)]
    assert ("tagged", "refund") in kinds and kinds[-1] == ("macro", "refund-sent")


def test_a_refused_step_leaves_nothing_behind(desk: Client, agent: PersonalAgent) -> None:
    macro(then=MacroThen.CLOSE)
    conversation_id = queued(agent, "hello")
    on_shift("bob")
    service.human_joined(conversation_id, by="bob", take_over=True)  # Bob has it
    before = Conversation.objects.get(pk=conversation_id).last_seq
    refused = act(desk, conversation_id, "macro", macro="refund-sent", seen=before)
    assert refused.status_code == 409 and refused.json()["error"] == "held_by_other"
    assert Conversation.objects.get(pk=conversation_id).last_seq == before
    assert service.tags_of(conversation_id) == []
    assert not DeskEvent.objects.filter(conversation_id=conversation_id, kind="macro").exists()


def test_a_macro_gives_a_waiting_one_to_a_teammate(desk: Client, agent: PersonalAgent) -> None:
    on_shift("bob")
    macro("to-bob", reply="", tags=["billing"], give_to="bob")
    conversation_id = queued(agent, "invoice question")
    answer = act(
        desk, conversation_id, "macro", macro="to-bob", seen=service.get(conversation_id).last_seq
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["conversation"]["assignee"] == "bob"
    assert service.get(conversation_id).status == "queued"


def test_no_such_macro(desk: Client, agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    refused = act(
        desk, conversation_id, "macro", macro="nope", seen=service.get(conversation_id).last_seq
    )
    assert refused.status_code == 404 and refused.json()["error"] == "not_found"


def test_the_admin_form_refuses_what_the_desk_could_not_run(db: None) -> None:
    on_shift("bob")
    typo = MacroForm({"shortcut": "x", "title": "X", "reply": "Hi {nmae}", "then": "keep"})
    assert "reply" in typo.errors
    stranger = MacroForm({"shortcut": "x", "title": "X", "give_to": "nobody", "then": "keep"})
    assert "give_to" in stranger.errors
    both = MacroForm({"shortcut": "x", "title": "X", "give_to": "bob", "then": "close"})
    assert both.errors["__all__"]
    fine = MacroForm({"shortcut": "x", "title": "X", "give_to": "bob", "then": "keep"})
    assert fine.is_valid(), fine.errors
