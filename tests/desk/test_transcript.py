"""Every event type as a person at the desk reads it."""

from __future__ import annotations

from django.utils import timezone

from poppy_django.desk.transcript import describe
from poppy_django.models import Event


def event(type: str, payload: dict, meta: dict | None = None, seq: int = 1) -> Event:
    return Event(
        conversation_id="cnv_x",
        seq=seq,
        type=type,
        payload=payload,
        meta=meta or {},
        created_at=timezone.now(),
    )


def test_messages_say_who_wrote_what() -> None:
    user = describe(
        event("message", {"message": {"id": "m", "role": "user", "sender": "agent", "text": "hi"}})
    )
    assert (user.who, user.kind, user.text) == ("Customer", "user", "hi")
    # No text: the customer's agent acting by itself (a context update, data).
    acting = describe(
        event(
            "message",
            {
                "message": {
                    "id": "m",
                    "role": "user",
                    "sender": "agent",
                    "context": {"locale": "fr"},
                }
            },
        )
    )
    assert (acting.who, acting.text) == ("Customer's agent", "(context only)")
    person = describe(
        event(
            "message",
            {"message": {"id": "m", "role": "company", "sender": "human", "text": "Sam here"}},
            {"by": "sam", "request_id": "r-1"},
        )
    )
    assert (person.who, person.kind, person.request_id) == ("sam (person)", "human", "r-1")
    in_person = describe(
        event("message", {"message": {"id": "m", "role": "user", "sender": "human", "text": "me"}})
    )
    assert in_person.who == "Customer (in person)"


def test_components_and_actions_by_their_text() -> None:
    entry = describe(
        event(
            "message",
            {
                "message": {
                    "id": "m",
                    "role": "company",
                    "sender": "agent",
                    "text": "Order A-1: shipped.",
                    "data": {
                        "components": [
                            {
                                "name": "order_card",
                                "props": {},
                                "fallback_text": "Order A-1: shipped.",
                            }
                        ],
                        "actions": [
                            {
                                "tool": "cancel_order",
                                "status": "failed",
                                "summary": "Cancel order A-1",
                                "error": "shipped",
                            }
                        ],
                        "extra": 1,
                    },
                }
            },
        )
    )
    assert entry.who == "Company Agent"
    assert entry.details == [
        "Component order_card: Order A-1: shipped.",
        "Action cancel_order: failed — Cancel order A-1 (shipped)",
        'Data: {"extra": 1}',
    ]


def test_context_only_messages() -> None:
    entry = describe(
        event(
            "message",
            {
                "message": {
                    "id": "m",
                    "role": "user",
                    "sender": "agent",
                    "context": {"locale": "fr"},
                }
            },
        )
    )
    assert entry.text == "(context only)" and entry.details == ["Context: locale=fr"]


def test_state_changes_authorization_and_requests() -> None:
    assert (
        describe(event("state", {"status": "queued", "responder": "agent"})).text
        == "Waiting for a person"
    )
    joined = describe(event("state", {"status": "idle", "responder": "human"}, {"by": "sam"}))
    assert joined.text == "With a person (by sam)" and joined.kind == "state"
    assert describe(event("state", {"status": "closed", "responder": "agent"})).text == "Closed"
    auth = describe(event("authorization", {"error": "insufficient_scope", "scope": "poppy:write"}))
    assert auth.text == "The customer's agent needs another permission"
    assert auth.who == "Sign-in or permission asked" and auth.details == [
        "insufficient_scope, scope poppy:write"
    ]
    asked = describe(event("user_requested", {"reason": "confirm"}, {"by": "kim"}))
    assert (asked.who, asked.text) == ("kim", "Asked for the customer in person: confirm")
    opened = describe(event("direct_opened", {"conversation_id": "cnv_d"}))
    assert opened.text == "The customer came in person" and opened.link == "cnv_d"
    closed = describe(event("direct_closed", {"conversation_id": "cnv_d"}))
    assert closed.text == "The in-person conversation ended"
