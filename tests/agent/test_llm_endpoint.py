"""The example project's Company Agent answered through the real provider path.

``POPPY["MODEL"] = "openai-chat:local"`` with ``OPENAI_BASE_URL`` naming the LLM-shaped local
model (tests/llm_endpoint.py): pydantic-ai's OpenAI chat model, the ``openai`` SDK's httpx
streaming and retries, the agent loop with tool calls, and text deltas on the conversation's
SSE stream — what a turn with a real LLM runs. The faults a provider has (429, a hang, an
error or a cut mid-stream) end the turn with the failed-turn message.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from example_project.shop.agent import STORE_HOURS
from example_project.shop.models import Order
from poppy_django.client import SSEFrame
from poppy_django.conf import DEFAULT_TEXTS
from tests.agents import PersonalAgent, messages
from tests.llm_endpoint import Pace, Serving, serving
from tests.stream.asgi import get
from tests.waiting import eventually

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shop_orders")]

FAILED = DEFAULT_TEXTS["failed_turn"]


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Serving]:
    # Quick answers (the tests are about the path, not the pace); a short Retry-After.
    with serving(Pace(ttft=0.05, tokens=8, rate=200), retry_after=0.1) as running:
        yield running


@pytest.fixture(autouse=True)
def through_endpoint(endpoint: Serving, settings, monkeypatch) -> Serving:
    """The example project's settings, its model an OpenAI-compatible endpoint by URL."""
    monkeypatch.setenv("OPENAI_BASE_URL", endpoint.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    settings.POPPY = {**settings.POPPY, "MODEL": "openai-chat:local"}
    httpx.post(f"{endpoint.url}/stats/reset").raise_for_status()
    return endpoint


def stats(endpoint: Serving) -> dict[str, Any]:
    return httpx.get(f"{endpoint.url}/stats").json()


def reply(pa: PersonalAgent, text: str) -> dict[str, Any]:
    conversation_id = pa.start(text).json()["conversation_id"]
    return messages(pa.settled(conversation_id, timeout=30))[-1]


def streamed_turn(pa: PersonalAgent, conversation_id: str, text: str) -> list[SSEFrame]:
    """The SSE frames of one more turn, read by a stream opened before the message is sent."""
    cursor = pa.read(conversation_id).json()["cursor"]
    opened = threading.Event()
    frames: list[SSEFrame] = []

    def idle(body: bytes) -> bool:
        return body.rstrip().endswith(b'"status":"idle","responder":"agent"}')

    headers = {"authorization": pa.headers()["HTTP_AUTHORIZATION"], "accept": "text/event-stream"}

    def read() -> None:
        frames.extend(
            get(
                f"/poppy/conversations/{conversation_id}/events?cursor={cursor}",
                headers,
                hang_up=idle,
                timeout=30,
                opened=opened,
            ).frames
        )

    reader = threading.Thread(target=read)
    reader.start()
    assert opened.wait(10), "the stream did not open"
    assert pa.send(conversation_id, text).status_code == 202
    reader.join(40)
    assert not reader.is_alive()
    return frames


def test_text_streams_as_deltas_and_ends_as_the_company_message(agent: PersonalAgent) -> None:
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    frames = streamed_turn(agent, conversation_id, "how are you?")
    deltas = [frame.json() for frame in frames if frame.event == "text-delta"]
    stored = [frame.json() for frame in frames if frame.event == "message"]
    (answer,) = [m for m in messages(stored) if m["role"] == "company"]
    assert answer["text"] == "You said: how are you? and here is"
    # Eight tokens, in order, all belonging to the message that was written: those that
    # arrived within one of the publisher's ticks come in one delta.
    assert 1 <= len(deltas) <= 8
    assert "".join(delta["text"] for delta in deltas) == answer["text"]
    assert {delta["message_id"] for delta in deltas} == {answer["id"]}


def test_turns_after_the_first_build_no_provider(agent: PersonalAgent, monkeypatch) -> None:
    """A provider (its HTTP client and TLS context) is built once per process and loop, not
    per turn: each one costs tens of ms of CPU on the engine's loop, stalling every turn."""
    from pydantic_ai.providers.openai import OpenAIProvider

    assert reply(agent, "first")["text"].startswith("You said: first")
    built: list[object] = []
    build = OpenAIProvider.__init__

    def counted(self: OpenAIProvider, *args: Any, **kwargs: Any) -> None:
        built.append(self)
        build(self, *args, **kwargs)

    monkeypatch.setattr(OpenAIProvider, "__init__", counted)
    for text in ("second", "third"):
        assert reply(agent, text)["text"].startswith(f"You said: {text}")
    assert built == []


def test_turns_after_the_first_build_no_tool_schema(agent: PersonalAgent, monkeypatch) -> None:
    """A tool's JSON schema is generated once per process: pydantic builds it in ~1 ms of
    CPU, and every LLM turn offers every tool (on the loop the process's turns share)."""
    from pydantic import BaseModel

    assert reply(agent, "first")["text"].startswith("You said: first")
    built: list[type[BaseModel]] = []
    generate = BaseModel.model_json_schema.__func__  # type: ignore[attr-defined]

    def counted(cls: type[BaseModel], *args: Any, **kwargs: Any) -> dict[str, Any]:
        built.append(cls)
        return generate(cls, *args, **kwargs)

    monkeypatch.setattr(BaseModel, "model_json_schema", classmethod(counted))
    for text in ("second", "third"):
        assert reply(agent, text)["text"].startswith(f"You said: {text}")
    assert built == []


def test_a_read_tool_is_called_and_its_result_answered(through_endpoint: Serving, agent) -> None:
    answer = reply(agent, "store_hours, please")
    assert answer["text"] == f"We are open {STORE_HOURS}."
    # Two model calls: the tool call, then the answer after the tool's result.
    served = stats(through_endpoint)
    assert (served["requests"], served["tool_calls"]) == (2, 1)


def test_a_signed_in_tool_reads_the_account(acct1: PersonalAgent) -> None:
    assert reply(acct1, "list_orders")["text"] == ("Your orders: A-1 (shipped), A-2 (processing).")


def test_an_action_is_run_once_through_the_model(acct1: PersonalAgent) -> None:
    answer = reply(acct1, "cancel_order A-2 please")
    assert answer["data"]["actions"][0]["status"] == "succeeded"
    assert Order.objects.get(id="A-2").status == Order.Status.CANCELLED


def test_a_rate_limit_once_is_retried_within_the_turn(through_endpoint: Serving, agent) -> None:
    answer = reply(agent, "hello #429")
    assert answer["text"].startswith("You said: hello")
    assert stats(through_endpoint)["rate_limited"] == 1


def test_a_rate_limit_that_lasts_is_a_failed_turn(through_endpoint: Serving, agent) -> None:
    assert reply(agent, "hello #429=10")["text"] == FAILED
    # The SDK's own retries (two), then the turn fails.
    assert stats(through_endpoint)["rate_limited"] == 3


@pytest.mark.parametrize("fault", ["#error", "#drop"])
def test_a_provider_failing_mid_stream_is_a_failed_turn(fault: str, agent) -> None:
    assert reply(agent, f"hello {fault}")["text"] == FAILED


def test_a_hung_provider_is_a_failed_turn_at_the_time_limit(agent, settings) -> None:
    settings.POPPY = {**settings.POPPY, "TURN_TIMEOUT_SECONDS": 2.0}
    answer = reply(agent, "hello #hang")
    assert answer["text"] == FAILED


def test_a_hung_providers_call_is_closed_when_the_turn_is_abandoned(
    through_endpoint: Serving, agent, settings
) -> None:
    settings.POPPY = {**settings.POPPY, "TURN_TIMEOUT_SECONDS": 1.0}
    assert reply(agent, "hello #hang")["text"] == FAILED
    eventually(lambda: stats(through_endpoint)["open"] == 0, what="the provider's call closed")
