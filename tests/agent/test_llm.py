"""PydanticAIModel on pydantic-ai's offline FunctionModel and TestModel: no network, no keys."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from poppy_django.agent.llm import PydanticAIModel
from poppy_django.agent.model_api import ModelTurn, TurnInput, TurnInterrupted
from poppy_django.agent.model_choice import build_model
from poppy_django.agent.scripted import ScriptedModel
from poppy_django.agent.tools import tool


@tool(roles=["personal_agent"])
def order_status(ctx: Any, order_id: str, verbose: bool = False) -> dict[str, Any]:
    """The status of one of the account's orders."""
    raise AssertionError("the runtime runs tools, not the model")


@tool(kind="action", roles=["scope:poppy:write"], summary="Cancel order {order_id}")
def cancel_order(ctx: Any, order_id: str) -> dict[str, Any]:
    """Cancel an order."""
    raise AssertionError("the runtime runs tools, not the model")


def make_turn(text: str = "Where is A-1?", **overrides: Any) -> ModelTurn:
    fields: dict[str, Any] = {
        "instructions": "You are Acme's support agent.",
        "history": [],
        "inputs": [TurnInput(text=text, data=None, sender="personal_agent")],
        "tools": [order_status, cancel_order],
    }
    fields.update(overrides)
    return ModelTurn(**fields)


class Recorder:
    """The runtime's side of a turn: records text and tool calls, answers calls from a script."""

    def __init__(self, results: dict[str, Any] | None = None) -> None:
        self.pieces: list[str] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.threads: set[int] = set()
        self.results = results or {}

    def emit_text(self, piece: str) -> None:
        self.threads.add(threading.get_ident())
        self.pieces.append(piece)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        self.threads.add(threading.get_ident())
        self.calls.append((name, arguments))
        result = self.results[name]
        if isinstance(result, BaseException):
            raise result
        return result

    def run(self, model: PydanticAIModel, turn: ModelTurn | None = None) -> None:
        asyncio.run(model.run(turn or make_turn(), self.call_tool, self.emit_text))


def tool_returns(messages: list[ModelMessage], outcome: str = "success") -> list[ToolReturnPart]:
    """What the latest request tells the model about its tool calls (a retry is a return too)."""
    last = messages[-1]
    return [
        part for part in last.parts if isinstance(part, ToolReturnPart) and part.outcome == outcome
    ]


def call(name: str, args: str, call_id: str) -> dict[int, DeltaToolCall]:
    return {0: DeltaToolCall(name=name, json_args=args, tool_call_id=call_id)}


def test_text_reaches_emit_text_in_pieces_while_the_model_writes() -> None:
    first_piece_seen = threading.Event()
    recorder = Recorder()
    original_emit = recorder.emit_text

    def emit_text(piece: str) -> None:
        original_emit(piece)
        first_piece_seen.set()

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield "Your order "
        # Streaming, not buffering: the first piece arrives before the model writes the rest.
        assert await asyncio.to_thread(first_piece_seen.wait, 5)
        yield "A-1 has "
        yield "shipped."

    asyncio.run(
        PydanticAIModel(FunctionModel(stream_function=stream)).run(
            make_turn(), recorder.call_tool, emit_text
        )
    )

    assert recorder.pieces == ["Your order ", "A-1 has ", "shipped."]
    assert recorder.calls == []


def test_a_tool_call_reaches_call_tool_validated_and_its_result_goes_back() -> None:
    offered: list[AgentInfo] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        offered.append(info)
        if returns := tool_returns(messages):
            yield f"It is {returns[0].content['status']}."
        else:
            yield call("order_status", '{"order_id": "A-1"}', "call-1")

    recorder = Recorder({"order_status": {"status": "shipped"}})
    recorder.run(PydanticAIModel(FunctionModel(stream_function=stream)))

    # Defaults filled in by the tool's input model: the arguments were validated.
    assert recorder.calls == [("order_status", {"order_id": "A-1", "verbose": False})]
    assert "".join(recorder.pieces) == "It is shipped."
    tools = {definition.name: definition for definition in offered[0].function_tools}
    assert tools.keys() == {"order_status", "cancel_order"}
    assert tools["order_status"].parameters_json_schema == order_status.json_schema()
    assert tools["order_status"].description == order_status.description


def test_callbacks_run_on_the_loop_that_awaits_the_model() -> None:
    """The model never calls back from a thread of its own: the runtime decides where
    blocking work runs (the engine's database threads)."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if tool_returns(messages):
            yield "Done."
        else:
            yield call("order_status", '{"order_id": "A-1"}', "call-1")

    recorder = Recorder({"order_status": {"status": "shipped"}})
    recorder.run(PydanticAIModel(FunctionModel(stream_function=stream)))

    assert recorder.threads == {threading.get_ident()}


def test_invalid_arguments_go_back_to_the_model_not_to_call_tool() -> None:
    retries: list[ToolReturnPart] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        retries.extend(tool_returns(messages, outcome="retried"))
        if tool_returns(messages):
            yield "Done."
        elif retries:
            yield call("order_status", '{"order_id": "A-1"}', "call-2")
        else:
            yield call("order_status", '{"verbose": "very"}', "call-1")

    recorder = Recorder({"order_status": {"status": "shipped"}})
    recorder.run(PydanticAIModel(FunctionModel(stream_function=stream)))

    assert recorder.calls == [("order_status", {"order_id": "A-1", "verbose": False})]
    assert len(retries) == 1
    assert "order_status needs order_id." in str(retries[0].content)  # words, not a list
    assert "verbose" in str(retries[0].content)


def test_calls_in_one_response_reach_call_tool_one_at_a_time_in_order() -> None:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if tool_returns(messages):
            yield "Cancelled."
        else:
            yield {
                0: DeltaToolCall(
                    name="cancel_order", json_args='{"order_id": "A-1"}', tool_call_id="c1"
                ),
                1: DeltaToolCall(
                    name="order_status", json_args='{"order_id": "A-1"}', tool_call_id="c2"
                ),
            }

    recorder = Recorder({"cancel_order": {"ok": True}, "order_status": {"status": "cancelled"}})
    recorder.run(PydanticAIModel(FunctionModel(stream_function=stream)))

    assert [name for name, _ in recorder.calls] == ["cancel_order", "order_status"]


def test_turn_interrupted_ends_the_turn() -> None:
    requests: list[list[ModelMessage]] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        requests.append(messages)
        if tool_returns(messages):
            yield "The model must not be asked again."
        else:
            yield {
                0: DeltaToolCall(
                    name="cancel_order", json_args='{"order_id": "A-1"}', tool_call_id="c1"
                ),
                1: DeltaToolCall(
                    name="order_status", json_args='{"order_id": "A-1"}', tool_call_id="c2"
                ),
            }

    refusal = TurnInterrupted("insufficient_scope")
    recorder = Recorder({"cancel_order": refusal, "order_status": {"status": "shipped"}})

    with pytest.raises(TurnInterrupted) as raised:
        recorder.run(PydanticAIModel(FunctionModel(stream_function=stream)))

    assert raised.value is refusal
    assert [name for name, _ in recorder.calls] == ["cancel_order"]
    assert len(requests) == 1
    assert recorder.pieces == []


def test_text_before_a_tool_call_is_emitted_and_set_apart_from_the_answer() -> None:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if tool_returns(messages):
            yield "It has "
            yield "shipped."
        else:
            yield "Let me check."
            yield call("order_status", '{"order_id": "A-1"}', "call-1")

    recorder = Recorder({"order_status": {"status": "shipped"}})
    recorder.run(PydanticAIModel(FunctionModel(stream_function=stream)))

    assert recorder.pieces == ["Let me check.", "\n\nIt has ", "shipped."]


def test_history_inputs_instructions_and_page_context_reach_the_model() -> None:
    seen: list[tuple[list[ModelMessage], AgentInfo]] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        seen.append((messages, info))
        yield "ok"

    turn = make_turn(
        history=[
            {"role": "user", "text": "Hi"},
            {"role": "assistant", "text": "Hello! How can I help?"},
            {"role": "system", "text": "The User signed in."},
            {"role": "user", "text": "My orders?"},
            {"role": "assistant", "text": "You have two."},
        ],
        inputs=[
            TurnInput(text="Cancel A-2", data=None, sender="personal_agent"),
            TurnInput(text="please", data={"reason": "late"}, sender="personal_agent"),
        ],
        page_context={"channel": "poppy", "poppy": {"signedIn": True}},
    )
    Recorder().run(PydanticAIModel(FunctionModel(stream_function=stream)), turn)

    messages, info = seen[0]
    assert [type(message) for message in messages] == [
        ModelRequest,
        ModelResponse,
        ModelRequest,
        ModelResponse,
        ModelRequest,
    ]
    contents = [[(type(part), part.content) for part in message.parts] for message in messages]
    assert contents[:2] == [[(UserPromptPart, "Hi")], [(TextPart, "Hello! How can I help?")]]
    # pydantic-ai sends a system entry as a system message where the model has one
    # mid-conversation, else as a <system> block in the user turn (FunctionModel has none).
    (note_kind, note), asked = contents[2]
    assert note_kind in (SystemPromptPart, UserPromptPart)
    assert "The User signed in." in str(note)
    assert asked == (UserPromptPart, "My orders?")
    assert contents[3] == [(TextPart, "You have two.")]
    assert contents[4] == [(UserPromptPart, 'Cancel A-2\n\nplease (data: {"reason": "late"})')]
    assert info.instructions is not None
    assert info.instructions.startswith("You are Acme's support agent.")
    assert '{"channel": "poppy", "poppy": {"signedIn": true}}' in info.instructions


def test_a_model_error_propagates() -> None:
    class ProviderDown(RuntimeError):
        pass

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield "Let me"
        raise ProviderDown("503 from the provider")

    recorder = Recorder()
    with pytest.raises(ProviderDown, match="503"):
        recorder.run(PydanticAIModel(FunctionModel(stream_function=stream)))


def test_an_emit_text_error_ends_the_turn() -> None:
    requests = 0

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        nonlocal requests
        requests += 1
        yield "Checking"
        yield call("order_status", '{"order_id": "A-1"}', "call-1")

    def emit_text(piece: str) -> None:
        raise ConnectionError("lease lost")

    recorder = Recorder({"order_status": {"status": "shipped"}})
    model = PydanticAIModel(FunctionModel(stream_function=stream))
    with pytest.raises(ConnectionError, match="lease lost"):
        asyncio.run(model.run(make_turn(), recorder.call_tool, emit_text))

    assert recorder.calls == []
    assert requests == 1


def test_pydantic_ai_test_model_by_name() -> None:
    recorder = Recorder({"order_status": {"status": "shipped"}, "cancel_order": {"ok": True}})
    recorder.run(PydanticAIModel("test"), make_turn(tools=[order_status]))

    assert [name for name, _ in recorder.calls] == ["order_status"]
    assert "shipped" in "".join(recorder.pieces)


def test_one_model_serves_turns_on_successive_event_loops() -> None:
    """A provider's client belongs to its loop: a model used on a new loop (a new engine
    after a fork or a restart) makes a new one rather than reusing a closed one."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield "fine"

    recorder = Recorder()
    model = PydanticAIModel(FunctionModel(stream_function=stream))
    recorder.run(model)
    recorder.run(model)
    assert recorder.pieces == ["fine", "fine"]


def test_build_model_picks_the_scripted_model_or_pydantic_ai() -> None:
    assert isinstance(build_model("scripted"), ScriptedModel)
    assert isinstance(build_model("test"), PydanticAIModel)


def test_build_model_refuses_a_name_pydantic_ai_cannot_use() -> None:
    with pytest.raises(ImproperlyConfigured, match="'gpt-4o' cannot be used: Unknown model"):
        build_model("gpt-4o")


def test_build_model_names_the_extra_when_pydantic_ai_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "poppy_django.agent.llm")
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)

    with pytest.raises(ImproperlyConfigured, match=r"poppy-django\[llm\]"):
        build_model("openai:gpt-4o")
    assert isinstance(build_model("scripted"), ScriptedModel)
