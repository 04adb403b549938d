"""Turns through HTTP: the example project's scripted model, scopes, actions, components."""

from __future__ import annotations

import json
from typing import Any

import pytest

from example_project.shop.agent import STORE_HOURS
from example_project.shop.models import Order
from poppy_django.agent.scripted import ScriptedModel
from poppy_django.models import ActionRecord, AgentThread, Conversation
from poppy_django.verifier import Actor
from poppy_django.verifier.fake import fake_authorization
from tests.agents import PersonalAgent, kinds, messages
from tests.waiting import eventually
from tests.wire.wire_support import poppy, quiet_start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]

SEED = [
    ("A-1", "acct-1", "Trail running shoes", "shipped"),
    ("A-2", "acct-1", "Rain jacket", "processing"),
    ("B-1", "acct-2", "Camping stove", "shipped"),
]

PLAIN = [
    ("message", "user"),
    ("state", "working", "agent"),
    ("message", "company"),
    ("state", "idle", "agent"),
]


@pytest.fixture(autouse=True)
def orders() -> None:
    """The seed orders (a transactional test's flush removes migration data)."""
    for order_id, account_id, item, status in SEED:
        Order.objects.update_or_create(
            id=order_id, defaults={"account_id": account_id, "item": item, "status": status}
        )


def converse(agent: PersonalAgent, text: str | None, **message: Any) -> tuple[str, list[dict]]:
    response = agent.start(text, **message)
    assert response.status_code == 201, response.content
    conversation_id = response.json()["conversation_id"]
    return conversation_id, agent.settled(conversation_id)


def reply_of(events: list[dict]) -> dict:
    replies = [m for m in messages(events) if m["role"] == "company"]
    assert len(replies) == 1, events
    return replies[0]


def test_hours(agent):
    _, events = converse(agent, "What are your hours?")
    assert kinds(events) == PLAIN
    reply = reply_of(events)
    assert reply["sender"] == "agent"
    assert reply["text"] == f"We are open {STORE_HOURS}."


def test_orders_with_the_read_scope(acct1):
    _, events = converse(acct1, "show my orders")
    assert kinds(events) == PLAIN
    assert reply_of(events)["text"] == "Your orders: A-1 (shipped), A-2 (processing)."


def test_orders_list_only_the_accounts_own(acct1):
    acct2 = PersonalAgent(account_id="acct-2", scopes=("poppy:read",))
    _, events = converse(acct2, "orders")
    assert reply_of(events)["text"] == "Your orders: B-1 (shipped)."


def test_cancel_succeeds_with_data_actions_and_text_telling_it(acct1):
    _, events = converse(acct1, "please cancel A-2")
    assert kinds(events) == PLAIN
    reply = reply_of(events)
    assert reply["data"]["actions"] == [
        {
            "tool": "cancel_order",
            "status": "succeeded",
            "summary": "Cancel order A-2",
            "result": {"order_id": "A-2", "status": "cancelled"},
        }
    ]
    assert reply["text"] == "Done: Cancel order A-2."
    assert Order.objects.get(id="A-2").status == "cancelled"


def test_cancelling_another_accounts_order_is_a_failed_action(acct1):
    _, events = converse(acct1, "cancel B-1")
    reply = reply_of(events)
    (action,) = reply["data"]["actions"]
    assert action["tool"] == "cancel_order" and action["status"] == "failed"
    assert action["error"] == "order B-1 is not on this account"
    assert "result" not in action
    assert "B-1" in reply["text"] and "not on this account" in reply["text"]
    assert Order.objects.get(id="B-1").status == "shipped"


def test_cancelling_a_shipped_order_fails_and_says_why(acct1):
    _, events = converse(acct1, "cancel A-1")
    reply = reply_of(events)
    assert reply["data"]["actions"][0]["status"] == "failed"
    assert "A-1 is shipped" in reply["text"]
    assert Order.objects.get(id="A-1").status == "shipped"


def test_a_component_with_its_fallback_as_the_text(agent):
    _, events = converse(agent, "what is the status of A-1?")
    reply = reply_of(events)
    assert reply["data"] == {
        "components": [
            {
                "name": "order_card",
                "props": {"id": "A-1", "status": "shipped"},
                "fallback_text": "Order A-1: shipped.",
            }
        ]
    }
    assert reply["text"] == "Order A-1: shipped."


def test_a_failed_turn_says_so_and_goes_back_to_idle(agent):
    conversation_id, events = converse(agent, "#fail please")
    assert kinds(events) == PLAIN
    reply = reply_of(events)
    assert reply["sender"] == "agent" and "something went wrong" in reply["text"]
    assert "data" not in reply
    # The conversation goes on.
    agent.send(conversation_id, "hello again")
    events = agent.settled(conversation_id)
    assert messages(events)[-1]["text"] == "You said: hello again"


def test_history_counts_the_threads_user_messages(agent):
    conversation_id, _ = converse(agent, "first words")
    agent.send(conversation_id, "second")
    agent.settled(conversation_id)
    agent.send(conversation_id, "#history")
    events = agent.settled(conversation_id)
    assert messages(events)[-1]["text"] == "I see 3 messages; the first was: first words."


def test_echo_with_data_appends_the_json(agent):
    data = {"sku": "X1", "qty": 2}
    _, events = converse(agent, "hi there", data=data)
    text = reply_of(events)["text"]
    prefix = "You said: hi there (data: "
    assert text.startswith(prefix) and text.endswith(")"), text
    assert json.loads(text[len(prefix) : -1]) == data


def test_signed_out_orders_asks_to_sign_in_and_writes_no_company_message(agent):
    conversation_id, events = converse(agent, "my orders")
    assert kinds(events) == [
        ("message", "user"),
        ("state", "working", "agent"),
        ("authorization",),
        ("state", "idle", "agent"),
    ]
    authorization = events[2]
    assert authorization["error"] == "sign_in_required"
    assert authorization["scope"] == "poppy:read"
    assert Conversation.objects.get(pk=conversation_id).status == "idle"


def test_scopes_of_a_signed_out_token_do_not_count(agent):
    scoped = PersonalAgent(agent.client_id, agent.user_id, scopes=("poppy:read", "poppy:write"))
    _, events = converse(scoped, "cancel A-2")
    (authorization,) = [e for e in events if e["type"] == "authorization"]
    assert authorization["error"] == "sign_in_required"
    assert authorization["scope"] == "poppy:write"
    assert Order.objects.get(id="A-2").status == "processing"


def test_signed_in_without_write_scope_is_insufficient_scope(acct1):
    reader = acct1.signed_in("acct-1", ("poppy:read",))
    conversation_id, events = converse(reader, "cancel A-2")
    assert kinds(events) == [
        ("message", "user"),
        ("state", "working", "agent"),
        ("authorization",),
        ("state", "idle", "agent"),
    ]
    assert events[2]["error"] == "insufficient_scope"
    assert events[2]["scope"] == "poppy:write"
    assert Order.objects.get(id="A-2").status == "processing"
    assert not ActionRecord.objects.filter(conversation_id=conversation_id).exists()


def test_messages_during_a_turn_are_answered_by_the_next_turn(agent):
    conversation_id = agent.start("#slow please").json()["conversation_id"]
    # The first turn has fixed what it answers (planned) before the second message arrives.
    eventually(
        lambda: Conversation.objects.get(pk=conversation_id).turn_upto_seq > 0,
        what="the first turn to start",
    )
    response = agent.send(conversation_id, "and another thing")
    assert response.status_code == 202
    assert response.json()["status"] == "working"
    events = agent.events_until(
        conversation_id,
        lambda es: (
            len([m for m in messages(es) if m["role"] == "company"]) == 2
            and es[-1]["type"] == "state"
            and es[-1]["status"] == "idle"
        ),
    )
    assert [m["text"] for m in messages(events) if m["role"] == "company"] == [
        "Let me check that for you.",
        "You said: and another thing",
    ]
    assert kinds(events)[-1] == ("state", "idle", "agent")
    assert len({m["id"] for m in messages(events)}) == 4


class RecordingModel:
    """The scripted model, remembering the page context of each turn."""

    seen: list[dict[str, Any]] = []

    async def run(self, turn: Any, call_tool: Any, emit_text: Any) -> None:
        self.seen.append(turn.page_context)
        await ScriptedModel().run(turn, call_tool, emit_text)


def test_a_turn_gets_the_page_context(use_model, agent, monkeypatch):
    RecordingModel.seen = []
    use_model(RecordingModel())
    conversation_id = quiet_start(agent, locale="en-GB", time_zone="Europe/London")
    agent.send(conversation_id, "hello", sender="human", context={"user_available": True})
    events = agent.settled(conversation_id)
    # The recorded turn was answered by the model it wraps.
    assert messages(events)[-1]["text"] == "You said: hello"
    assert RecordingModel.seen == [
        {
            "channel": "poppy",
            "poppy": {
                "conversation_id": conversation_id,
                "direct": False,
                "sender": "human",
                "signed_in": False,
                "context": {
                    "locale": "en-GB",
                    "time_zone": "Europe/London",
                    "user_available": True,
                },
            },
        }
    ]


def test_the_page_context_says_when_signed_in(use_model, acct1, monkeypatch):
    RecordingModel.seen = []
    use_model(RecordingModel())
    converse(acct1, "hello")
    assert RecordingModel.seen[0]["poppy"]["signed_in"] is True
    assert RecordingModel.seen[0]["poppy"]["sender"] == "agent"


def test_the_reject_policy_refuses_every_action(acct1):
    with poppy(ACTIONS="reject"):
        _, events = converse(acct1, "cancel A-2")
    reply = reply_of(events)
    (action,) = reply["data"]["actions"]
    assert action["tool"] == "cancel_order" and action["status"] == "rejected"
    assert "A-2" in reply["text"] and "declined" in reply["text"]
    assert Order.objects.get(id="A-2").status == "processing"


def test_after_sign_in_the_accounts_first_turn_runs_in_its_own_thread_with_a_transcript(agent):
    conversation_id, _ = converse(agent, "hello")
    agent.send(conversation_id, "my orders")
    events = agent.settled(conversation_id)
    assert events[-2]["type"] == "authorization"
    # The personal agent continues with its new token.
    signed_in = agent.signed_in("acct-1", ("poppy:read",))
    assert signed_in.send(conversation_id, "my orders please").status_code == 202
    events = signed_in.settled(conversation_id)
    assert messages(events)[-1]["text"] == "Your orders: A-1 (shipped), A-2 (processing)."
    threads = {t.actor_id: t for t in AgentThread.objects.filter(conversation_id=conversation_id)}
    assert set(threads) == {"acct-1", next(a for a in threads if a.startswith("poppy:"))}
    account = threads["acct-1"]
    transcript = account.history[0]
    assert transcript["role"] == "system"
    for said in ("hello", "You said: hello", "my orders"):
        assert said in transcript["text"]
    assert {"role": "user", "text": "my orders please"} in account.history
    anonymous = next(t for a, t in threads.items() if a.startswith("poppy:"))
    assert all(entry["role"] != "system" for entry in anonymous.history)
    assert "my orders please" not in json.dumps(anonymous.history)


class ActingAgent(PersonalAgent):
    """A personal agent whose token names the actor (``principal.actor``)."""

    def __init__(self, actor_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.actor_id = actor_id

    def authorization(self) -> str:
        return fake_authorization(
            self.client_id,
            self.user_id,
            account_id=self.account_id,
            scopes=self.scopes,
            actor_id=self.actor_id,
        )


def actor_for(principal: Any, default: Any) -> Any:
    """An ``ACTOR_FOR`` hook: a staff proxy for one user, the default for the others."""
    if principal.user_id == "proxied-user":
        return Actor(id="proxy-actor")
    return None


def thread_actors(conversation_id: str) -> list[str]:
    return list(
        AgentThread.objects.filter(conversation_id=conversation_id).values_list(
            "actor_id", flat=True
        )
    )


def test_a_signed_out_turn_runs_as_a_stable_anonymous_actor(agent):
    first, _ = converse(agent, "hello")
    second, _ = converse(agent, "hello again")
    (actor,) = thread_actors(first)
    assert actor.startswith("poppy:") and actor != agent.user_id
    assert thread_actors(second) == [actor]
    other, _ = converse(PersonalAgent(client_id=agent.client_id), "hello")
    assert thread_actors(other)[0].startswith("poppy:") and thread_actors(other) != [actor]


def test_a_signed_in_turn_runs_as_the_account(acct1):
    conversation_id, _ = converse(acct1, "hello")
    assert thread_actors(conversation_id) == ["acct-1"]


def test_a_turn_runs_as_the_principals_actor(agent):
    acting = ActingAgent("delegate-7", client_id=agent.client_id, user_id=agent.user_id)
    conversation_id, _ = converse(acting, "hello")
    assert thread_actors(conversation_id) == ["delegate-7"]


def test_a_turn_runs_as_the_actor_for_hook_chooses(agent):
    proxied = PersonalAgent(client_id=agent.client_id, user_id="proxied-user")
    with poppy(ACTOR_FOR=f"{__name__}.actor_for"):
        chosen, _ = converse(proxied, "hello")
        default, _ = converse(agent, "hello")
    assert thread_actors(chosen) == ["proxy-actor"]
    assert thread_actors(default)[0].startswith("poppy:")
