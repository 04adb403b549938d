"""The model a setting names: ``"scripted"`` (``"scripted:<rules>"``), or a pydantic-ai name."""

from __future__ import annotations

from contextvars import ContextVar

from django.core.exceptions import ImproperlyConfigured

from poppy_django.agent.model_api import AsyncTurnModel, TurnModel
from poppy_django.agent.scripted import ScriptedModel, load_script

SCRIPTED = "scripted"
#: ``"scripted:myapp.agent.SCRIPT"``: the scripted model with a project's rules.
SCRIPTED_WITH_RULES = "scripted:"


#: A model that answers every turn started in this context, whatever the settings name
#: (:func:`poppy_django.testing.answer_turns` sets it: a test's own model).
model_in_use: ContextVar[TurnModel | AsyncTurnModel | None] = ContextVar(
    "poppy_model_in_use", default=None
)
#: Models that answer every turn of the process, on whichever thread it runs, the newest
#: first (:func:`poppy_django.testing.turn_model`: a test whose turns the engine runs).
process_models: list[TurnModel | AsyncTurnModel] = []


def model_under_test() -> TurnModel | AsyncTurnModel | None:
    """A test's own model for the turn starting here, if a test set one."""
    in_use = model_in_use.get()
    if in_use is not None:
        return in_use
    return process_models[-1] if process_models else None


def is_scripted(model_name: str) -> bool:
    return model_name == SCRIPTED or model_name.startswith(SCRIPTED_WITH_RULES)


def build_model(model_name: str | tuple[str, ...]) -> TurnModel | AsyncTurnModel:
    """``"scripted"`` is the offline model (``"scripted:<dotted path>"`` with a project's
    rules, see :mod:`poppy_django.agent.scripted`); anything else is a pydantic-ai model name.

    pydantic-ai is imported only here, so the app runs without the ``llm`` extra until a
    setting asks for a real LLM. A tuple is a fallback chain (pydantic-ai's
    ``FallbackModel``): each turn asks the first, and the next when one fails.
    """
    if isinstance(model_name, tuple):
        if len(model_name) == 1:
            return build_model(model_name[0])
        if any(is_scripted(name) for name in model_name):
            raise ImproperlyConfigured(
                f"The fallback chain {list(model_name)!r} names the scripted model, which "
                "answers every turn itself: a chain is of pydantic-ai model names."
            )
    elif model_name == SCRIPTED:
        return ScriptedModel()
    elif model_name.startswith(SCRIPTED_WITH_RULES):
        return ScriptedModel(load_script(model_name.removeprefix(SCRIPTED_WITH_RULES)))
    try:
        # The llm extra (pydantic-ai) is optional: imported only for a model that needs it.
        from pydantic_ai.exceptions import UserError

        from poppy_django.agent.llm import PydanticAIModel
    except ModuleNotFoundError as error:
        if error.name is None or error.name.split(".")[0] != "pydantic_ai":
            raise
        raise ImproperlyConfigured(
            f"The model {model_name!r} needs pydantic-ai: pip install 'poppy-django[llm]' "
            "(plus the provider's package, e.g. 'pydantic-ai-slim[openai]')."
        ) from error
    try:
        return PydanticAIModel(model_name)
    except (ImportError, UserError) as error:  # unknown name, provider package, API key
        raise ImproperlyConfigured(f"The model {model_name!r} cannot be used: {error}") from error
