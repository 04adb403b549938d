"""A turn failing at the model provider is logged with what tells the causes apart (the
model, the HTTP status, the provider's error code), never with what the User wrote."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic_ai.exceptions import ModelHTTPError, UnexpectedModelBehavior
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from poppy_django.agent.llm import PydanticAIModel
from poppy_django.observe import describe_failure
from tests.agent.test_llm import Recorder, make_turn

SECRET = "my-card-number-4242"


def failing(error: Exception) -> PydanticAIModel:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        raise error
        yield ""  # an async generator

    return PydanticAIModel(FunctionModel(stream_function=stream, model_name="gpt-nonexistent"))


def failure_of(model: PydanticAIModel) -> BaseException:
    recorder = Recorder()
    with pytest.raises(Exception) as caught:
        recorder.run(model, make_turn(SECRET))
    return caught.value


def test_a_wrong_model_name_says_404_and_the_providers_code() -> None:
    error = ModelHTTPError(
        404,
        "gpt-nonexistent",
        body={"error": {"code": "model_not_found", "message": f"no model; you said {SECRET}"}},
        provider_error_code="model_not_found",
        provider_error_type="invalid_request_error",
    )
    described = describe_failure(failure_of(failing(error)))
    assert "model gpt-nonexistent" in described
    assert "HTTP 404" in described
    assert "provider code model_not_found" in described
    assert "provider type invalid_request_error" in described
    assert SECRET not in described and "message withheld" in described


def test_an_outage_says_its_status() -> None:
    described = describe_failure(failure_of(failing(ModelHTTPError(503, "gpt-4o", body=None))))
    assert "HTTP 503" in described and "model gpt-4o" in described


def test_unexpected_behaviour_names_the_model_it_came_from() -> None:
    """pydantic-ai's UnexpectedModelBehavior carries no model name: the turn adds it."""
    error = UnexpectedModelBehavior(f"Invalid response: {SECRET}", body=SECRET)
    described = describe_failure(failure_of(failing(error)))
    assert described.startswith("pydantic_ai.exceptions.UnexpectedModelBehavior (")
    assert "model gpt-nonexistent" in described
    assert SECRET not in described
