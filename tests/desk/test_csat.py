"""The satisfaction survey after a person handled a conversation: asked through the protocol
(a ``csat_survey`` component and its fallback text), answered by a personal agent that knows
the component (``data.csat``) or by one that only reads the text, stored, thanked, no turn."""

from __future__ import annotations

from typing import Any

import pytest

from poppy_django import service
from poppy_django.models import CsatSurvey
from tests.agents import PersonalAgent, messages
from tests.desk.conftest import queued

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def surveys_on(settings: Any) -> None:
    settings.POPPY = {**settings.POPPY, "CSAT_SURVEY": True}


def handled(agent: PersonalAgent, by: str = "sam") -> tuple[str, dict[str, Any]]:
    """A conversation a person joined, answered and gave back: the survey message."""
    conversation_id = queued(agent, staff=by)
    seen = service.get(conversation_id).last_event_id
    service.post_message(conversation_id, "All sorted, bye!", by=by, seen=seen)
    service.human_left(conversation_id, by=by)
    survey = messages(agent.settled(conversation_id))[-1]
    return conversation_id, survey


@pytest.mark.usefixtures("surveys_on")
def test_the_survey_is_a_component_whose_fallback_text_asks_for_a_number(
    agent: PersonalAgent,
) -> None:
    conversation_id, survey = handled(agent)
    [component] = survey["data"]["components"]
    assert component["name"] == "csat_survey"
    assert survey["role"] == "company" and survey["sender"] == "agent"
    assert survey["text"] == component["fallback_text"]
    assert "1 (poor) to 5 (excellent)" in survey["text"]
    props = component["props"]
    assert props["survey_id"] == survey["id"] and (props["min"], props["max"]) == (1, 5)
    assert props["reply_with"]["data"]["csat"]["survey_id"] == survey["id"]
    stored = CsatSurvey.objects.get(conversation_id=conversation_id)
    assert (stored.staff, stored.rating, stored.message_id) == ("sam", None, survey["id"])


@pytest.mark.usefixtures("surveys_on")
def test_an_agent_that_knows_the_component_answers_with_data(agent: PersonalAgent) -> None:
    conversation_id, survey = handled(agent)
    answer = {"csat": {"survey_id": survey["id"], "rating": 5, "comment": "Quick and kind"}}
    sent = agent.send(conversation_id, None, data=answer)
    assert sent.status_code == 202 and sent.json()["status"] == "idle"
    events = agent.settled(conversation_id)
    assert messages(events)[-1]["text"] == "Thank you for your rating."
    after = events[[e.get("message", {}).get("id") for e in events].index(survey["id"]) :]
    assert [e["type"] for e in after] == ["message", "message", "message"]  # no turn
    stored = CsatSurvey.objects.get(conversation_id=conversation_id)
    assert (stored.rating, stored.comment, stored.answered_with) == (5, "Quick and kind", "data")


@pytest.mark.usefixtures("surveys_on")
def test_an_agent_that_knows_nothing_of_it_answers_in_words(agent: PersonalAgent) -> None:
    conversation_id, _ = handled(agent)
    agent.send(conversation_id, "4/5 - Bob was great")
    assert messages(agent.settled(conversation_id))[-1]["text"] == "Thank you for your rating."
    stored = CsatSurvey.objects.get(conversation_id=conversation_id)
    assert (stored.rating, stored.comment, stored.answered_with) == (4, "Bob was great", "text")
    # Answered once: a second number is the conversation's as usual (the agent answers it).
    agent.send(conversation_id, "2")
    assert messages(agent.settled(conversation_id))[-1]["text"] == "You said: 2"
    assert CsatSurvey.objects.get(conversation_id=conversation_id).rating == 4


@pytest.mark.usefixtures("surveys_on")
def test_a_number_said_later_is_not_a_rating(agent: PersonalAgent) -> None:
    conversation_id, _ = handled(agent)
    agent.send(conversation_id, "what are your hours?")
    agent.settled(conversation_id)
    agent.send(conversation_id, "3")
    assert messages(agent.settled(conversation_id))[-1]["text"] == "You said: 3"
    assert CsatSurvey.objects.get(conversation_id=conversation_id).answered_at is None


@pytest.mark.usefixtures("surveys_on")
@pytest.mark.parametrize(
    "data",
    [
        {"csat": {"rating": 6}},
        {"csat": {"rating": True}},
        {"csat": {"rating": "5"}},
        {"csat": {"rating": 4, "survey_id": "msg_another"}},
        {"csat": 5},
    ],
)
def test_an_answer_out_of_shape_is_an_ordinary_message(
    agent: PersonalAgent, data: dict[str, Any]
) -> None:
    conversation_id, _ = handled(agent)
    agent.send(conversation_id, "hm", data=data)
    assert messages(agent.settled(conversation_id))[-1]["text"].startswith("You said: hm")
    assert CsatSurvey.objects.get(conversation_id=conversation_id).answered_at is None


@pytest.mark.usefixtures("surveys_on")
def test_no_survey_for_a_waiting_handoff_given_back(agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    service.human_left(conversation_id, by="sam")
    assert not CsatSurvey.objects.filter(conversation_id=conversation_id).exists()


def test_off_by_default(agent: PersonalAgent) -> None:
    conversation_id, last = handled(agent)
    assert last["text"] == "All sorted, bye!"
    assert not CsatSurvey.objects.exists()
