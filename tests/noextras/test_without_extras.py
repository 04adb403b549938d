"""The app without its optional extras (``tox -e py311-noextras``): what is missing is named.

Skipped where the extras are installed (the dev venv); tox's ``noextras`` env installs the
package alone, with only the test harness (pytest, pytest-django, psycopg, dj-database-url).
"""

from __future__ import annotations

import importlib.util

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

pytestmark = [
    pytest.mark.noextras,
    pytest.mark.skipif(
        importlib.util.find_spec("httpx") is not None
        or importlib.util.find_spec("pydantic_ai") is not None,
        reason="needs an install without the client and llm extras (tox -e py311-noextras)",
    ),
]


def test_poppy_chat_names_the_extra_to_install() -> None:
    with pytest.raises(CommandError) as caught:
        call_command("poppy_chat", "--message", "hello")
    assert "pip install 'poppy-django[client]'" in str(caught.value)


def test_the_client_module_names_the_extra_to_install() -> None:
    with pytest.raises(ModuleNotFoundError) as caught:
        importlib.import_module("poppy_django.client")
    assert "pip install 'poppy-django[client]'" in str(caught.value)


def test_a_real_llm_is_a_check_warning_that_names_the_llm_extra(settings) -> None:
    from poppy_django.checks import check_settings

    with override_settings(POPPY={**settings.POPPY, "MODEL": "openai:gpt-4o"}):
        (warning,) = [m for m in check_settings() if m.id == "poppy_django.W006"]
    assert "pip install 'poppy-django[llm]'" in warning.msg
    assert "Install the llm extra" in warning.hint


@pytest.mark.django_db(transaction=True)
def test_the_scripted_model_answers_without_the_llm_extra(agent) -> None:
    from tests.agents import messages

    conversation_id = agent.start("hello there").json()["conversation_id"]
    assert messages(agent.settled(conversation_id))[-1]["text"] == "You said: hello there"
