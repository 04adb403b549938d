"""The satisfaction survey (CSAT) after a person handled a conversation, through the protocol.

When a staff member gives a conversation back to the Company Agent (``POPPY["CSAT_SURVEY"]``
on), the company asks, in a message whose text is the question (``TEXTS["csat_question"]``)
and whose ``data.components`` holds a ``csat_survey`` component::

    {"name": "csat_survey",
     "props": {"survey_id": "msg_…", "question": "…", "min": 1, "max": 5,
               "labels": {"1": "poor", "5": "excellent"},
               "reply_with": {"data": {"csat": {"survey_id": "msg_…", "rating": "1-5",
                                                "comment": "optional text"}}}},
     "fallback_text": "…"}

A personal agent that knows the component answers with ``data.csat`` (any time while the
survey is open); one that knows nothing of it reads the text and answers in words: a
message that starts with a number from 1 to 5 ("4", "4/5", "5 stars - quick and kind"),
counted only as the next message after the survey. An answer is stored (``CsatSurvey``),
thanked (``TEXTS["csat_thanks"]``) and starts no turn; any other message is the
conversation's as usual.
"""

from __future__ import annotations

import re
from typing import Any

from django.utils import timezone

from poppy_django import ids
from poppy_django.conf import poppy_settings
from poppy_django.models import Conversation, CsatSurvey, Event, EventType
from poppy_django.store import event_log
from poppy_django.store.wire import InboundMessage

COMPONENT = "csat_survey"
LOWEST, HIGHEST = 1, 5
LABELS = {str(LOWEST): "poor", str(HIGHEST): "excellent"}
#: The longest comment kept with a rating.
MAX_COMMENT = 2000
#: A rating in words: the number first, then perhaps "/5", "out of 5" or "stars", then a
#: comment after a space or punctuation.
RATING_TEXT = re.compile(
    r"\s*([1-5])\s*(?:/\s*5|out\s+of\s+5|stars?)?(?:$|[\s.!,:;\u2013\u2014-]+(.*))",
    re.IGNORECASE | re.DOTALL,
)


def ask(
    conversation: Conversation, *, staff: str, team: str = "", meta: dict[str, Any] | None = None
) -> CsatSurvey | None:
    """Ask the customer of the locked ``conversation`` to rate the help ``staff`` gave (None
    with ``CSAT_SURVEY`` off)."""
    if not poppy_settings.CSAT_SURVEY:
        return None
    question = poppy_settings.texts["csat_question"]
    message_id = ids.new_company_message_id()
    component = {
        "name": COMPONENT,
        "props": {
            "survey_id": message_id,
            "question": question,
            "min": LOWEST,
            "max": HIGHEST,
            "labels": LABELS,
            "reply_with": {
                "data": {
                    "csat": {
                        "survey_id": message_id,
                        "rating": f"{LOWEST}-{HIGHEST}",
                        "comment": "optional text",
                    }
                }
            },
        },
        "fallback_text": question,
    }
    event = event_log.append_company_message(
        conversation,
        message_id=message_id,
        text=question,
        data={"components": [component]},
        meta={**(meta or {}), "csat": "asked"},
    )
    return CsatSurvey.objects.create(
        conversation=conversation,
        message_id=message_id,
        seq=event.seq,
        staff=staff,
        team=team,
        asked_at=timezone.now(),
    )


def _answer(message: InboundMessage) -> tuple[int, str, str | None, str] | None:
    """``(rating, comment, survey id, how)`` when the message can be an answer: ``data.csat``
    (``how`` "data"), or a text that starts with a rating ("text"); else None."""
    answer = message.data.get("csat") if isinstance(message.data, dict) else None
    if isinstance(answer, dict):
        rating = answer.get("rating")
        if isinstance(rating, int) and not isinstance(rating, bool) and LOWEST <= rating <= HIGHEST:
            comment = answer.get("comment")
            survey_id = answer.get("survey_id")
            return (
                rating,
                comment.strip()[:MAX_COMMENT] if isinstance(comment, str) else "",
                survey_id if isinstance(survey_id, str) else None,
                "data",
            )
    found = RATING_TEXT.fullmatch(message.text or "")
    if found is None:
        return None
    return int(found.group(1)), (found.group(2) or "").strip()[:MAX_COMMENT], None, "text"


def take_answer(conversation: Conversation, message: InboundMessage) -> CsatSurvey | None:
    """When ``message`` answers the locked conversation's open survey: the survey, answered.
    Else None, and nothing written. A message that cannot be an answer costs no query."""
    answer = _answer(message)
    if answer is None:
        return None
    rating, comment, survey_id, how = answer
    survey = (
        CsatSurvey.objects.filter(conversation=conversation, answered_at__isnull=True)
        .order_by("-seq")
        .first()
    )
    if survey is None or (survey_id is not None and survey_id != survey.message_id):
        return None
    # In words, only as the next message: "3" later in the conversation is not a rating.
    later = Event.objects.filter(conversation=conversation, seq__gt=survey.seq)
    if how == "text" and later.filter(type=EventType.MESSAGE).exists():
        return None
    survey.rating = rating
    survey.comment = comment
    survey.answered_with = how
    survey.answered_at = timezone.now()
    survey.save(update_fields=["rating", "comment", "answered_at", "answered_with"])
    return survey


def thank(conversation: Conversation, survey: CsatSurvey) -> None:
    """The company's thanks for an answer (the Company Agent's, no turn)."""
    event_log.append_company_message(
        conversation,
        message_id=ids.new_company_message_id(),
        text=poppy_settings.texts["csat_thanks"],
        meta={"csat": "answered"},
    )
