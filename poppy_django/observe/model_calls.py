"""Each model request of a pydantic-ai model measured: a span, its latency, its tokens.

:class:`MeasuredModel` wraps the model a turn runs (pydantic-ai's public ``WrapperModel``), so
every request the agent makes — one per round of tool calls — is timed from sending it to the
end of its response, and its usage (pydantic-ai reports it per response) is counted by model.
The span carries the model's name, the token counts and the outcome; never the messages.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from opentelemetry.trace import SpanKind
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RequestUsage

from poppy_django.observe import metrics, tracing


class _Call:
    """One request being measured: its usage once its response is complete."""

    def __init__(self) -> None:
        self.usage: RequestUsage | None = None


@contextlib.contextmanager
def _measured(model: str) -> Iterator[_Call]:
    call = _Call()
    started = time.perf_counter()
    outcome = "error"
    with tracing.span("poppy.model", kind=SpanKind.CLIENT) as span:
        span.set_attribute("gen_ai.request.model", model)
        try:
            yield call
            outcome = "ok"
        except BaseException as exc:
            if not isinstance(exc, Exception):
                outcome = "cancelled"  # the turn's time limit, or its lease lost
            raise
        finally:
            usage = call.usage
            tokens_in = usage.input_tokens if usage else 0
            tokens_out = usage.output_tokens if usage else 0
            span.set_attribute("poppy.outcome", outcome)
            span.set_attribute("gen_ai.usage.input_tokens", tokens_in)
            span.set_attribute("gen_ai.usage.output_tokens", tokens_out)
            metrics.model_call(model, time.perf_counter() - started, outcome, tokens_in, tokens_out)


class MeasuredModel(WrapperModel):
    """A pydantic-ai model whose every request is measured (see the module's text)."""

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        with _measured(self.wrapped.model_name) as call:
            response = await super().request(messages, model_settings, model_request_parameters)
            call.usage = response.usage
            return response

    @contextlib.asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        with _measured(self.wrapped.model_name) as call:
            async with super().request_stream(
                messages, model_settings, model_request_parameters, run_context
            ) as stream:
                yield stream
            call.usage = stream.usage


def measured(model: Model) -> Model:
    """The model, measured (once: a measured model is returned as it is)."""
    return model if isinstance(model, MeasuredModel) else MeasuredModel(model)
