"""The Company Agent: a registered agent, its tools as declared (E401-E404, W401-W402) and
models that can be built (E007, W006)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from poppy_django.agent import registry
from poppy_django.agent.model_choice import SCRIPTED, build_model, is_scripted
from poppy_django.checks.poppy_dict import Messages, check_id
from poppy_django.conf import poppy_settings

if TYPE_CHECKING:
    from poppy_django.agent.registry import CompanyAgent


def agent_errors() -> Messages:
    """E007: the agent POPPY["AGENT"] names is not registered; W006: a model cannot be built."""
    errors: Messages = []
    agents = registry.registered()
    name = poppy_settings.raw("AGENT")
    if name not in agents:
        errors.append(
            checks.Error(
                f'POPPY["AGENT"] = {name!r} is not a registered Company Agent '
                f"(registered: {', '.join(sorted(agents)) or 'none'}).",
                hint="Register it from your AppConfig.ready(): "
                'poppy_django.agent.register(CompanyAgent(name="...", tools=[...])).',
                id=check_id("E007"),
            )
        )
    errors.extend(tool_errors(agents.values()))
    models = poppy_settings.raw("MODELS") or {}
    if not isinstance(models, Mapping):
        return errors
    for agent_name in sorted(set(models) - set(agents)):
        errors.append(
            checks.Warning(
                f'POPPY["MODELS"] names {agent_name!r}, which is not a registered Company Agent.',
                id=check_id("W006"),
            )
        )
    names = {_choice(poppy_settings.raw("MODEL")), *map(_choice, models.values())}
    errors.extend(_model_errors(sorted(names, key=str)))
    return errors


def tool_errors(agents: Iterable[CompanyAgent]) -> Messages:
    """E401-E404, W401-W402: each registered agent's tools as declared, one message each."""
    levels = {"E": checks.Error, "W": checks.Warning}
    return [
        levels[problem.code[0]](problem.message, hint=problem.hint, id=check_id(problem.code))
        for agent in agents
        for problem in agent.problems
    ]


def _choice(raw: object) -> str | tuple[str, ...]:
    """A model setting as a name, or a fallback chain as a tuple of names."""
    if isinstance(raw, list | tuple):
        return tuple(map(str, raw))
    return str(raw)


def _model_errors(names: list[str | tuple[str, ...]]) -> Messages:
    errors: Messages = []
    for model_name in names:
        if model_name == SCRIPTED:
            continue
        try:
            build_model(model_name)
        except ImproperlyConfigured as exc:
            errors.append(
                checks.Warning(
                    f"{exc} Turns answered by it fail in this process.",
                    hint=_model_hint(
                        is_scripted(model_name)
                        if isinstance(model_name, str)
                        else any(map(is_scripted, model_name))
                    ),
                    id=check_id("W006"),
                )
            )
    return errors


def _model_hint(scripted: bool) -> str:
    """What to do, by cause: the rules' path, the llm extra, or the provider's side."""
    if scripted:
        return (
            'Name a poppy_django.agent.scripted.Script: "scripted:yourapp.agent.SCRIPT" '
            "(see the Company Agent page of the docs)."
        )
    if importlib.util.find_spec("pydantic_ai") is None:
        return (
            "Install the llm extra (pip install 'poppy-django[llm]') and the provider's "
            "package, e.g. 'pydantic-ai-slim[openai]'."
        )
    return (
        "Install the provider's package (e.g. 'pydantic-ai-slim[openai]') and give its API key "
        "(e.g. OPENAI_API_KEY) to the environment of every process that runs turns: the "
        "Celery workers, or the web process in the embedded mode."
    )
