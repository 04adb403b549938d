"""Test your own Company Agent in your own test suite (docs/testing.md).

Three levels, each usable in Django's ``TestCase`` (rolled back with the test) and
``TransactionTestCase``, under ``manage.py test`` or pytest-django, on SQLite or PostgreSQL:

- a tool called directly: ``my_tool(tool_context(account_id="acct-1"), day="friday")``;
- a conversation as a personal agent has it, through Django's test client:
  :class:`PersonalAgentClient` (signed out, or signed in with scopes) sends a message, the
  turn is answered inline on the test's thread and database connection, and the reply,
  its actions and the events are there to assert;
- a test's own model for those turns: ``answer_turns(model=...)`` or
  ``PersonalAgentClient(model=...)`` takes a pydantic-ai model (``TestModel``,
  ``FunctionModel``) or any turn model, in place of ``POPPY["MODEL"]``.

:func:`poppy_test_settings` is the ``override_settings`` these need: the fake verifier
(which trusts the test client's ``PoppyFake`` header) and :class:`InlineExecutor` (turns wait
for the test instead of running on the engine's own threads and connections).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS
from django.test import Client, TestCase, override_settings

from poppy_django.agent.model_api import AsyncTurnModel, TurnModel
from poppy_django.agent.model_choice import model_in_use
from poppy_django.agent.runtime import resolve_actor, roles_of
from poppy_django.agent.tools import Tool, ToolContext
from poppy_django.conf import endpoint_prefix
from poppy_django.engine.inline import answer_inline
from poppy_django.verifier import Principal
from poppy_django.verifier.fake import fake_authorization

FAKE_VERIFIER = "poppy_django.verifier.fake.verify"
INLINE_EXECUTOR = "poppy_django.testing.InlineExecutor"
DEFAULT_CLIENT_ID = "https://agent.example/client"

_ids = itertools.count(1)


def poppy_test_settings(**poppy: Any) -> override_settings:
    """``override_settings`` of ``POPPY`` for tests: your settings, the fake verifier (with
    its explicit opt-in, ``ALLOW_FAKE_VERIFIER_WITHOUT_DEBUG``, so it runs whatever your
    settings' ``DEBUG``), turns answered by the test (:class:`InlineExecutor`), and any
    ``POPPY`` keys you pass.

    As a class or method decorator, or a context manager, like ``override_settings``.
    """
    return override_settings(
        POPPY={
            **getattr(settings, "POPPY", {}),
            "AUTHENTICATE": FAKE_VERIFIER,
            "ALLOW_FAKE_VERIFIER_WITHOUT_DEBUG": True,
            "EXECUTOR": INLINE_EXECUTOR,
            **poppy,
        }
    )


class InlineExecutor:
    """``POPPY["EXECUTOR"]`` in tests: a dispatched conversation waits for :func:`answer_turns`.

    The process's engine answers on threads of its own, with connections of their own: a
    ``TestCase`` would never see (nor roll back) what they write, and SQLite would refuse
    them while the test holds its write lock.
    """

    _pending: ClassVar[list[str]] = []
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def dispatch(cls, conversation_id: str) -> None:
        with cls._lock:
            if conversation_id not in cls._pending:
                cls._pending.append(conversation_id)

    @classmethod
    def take_pending(cls) -> list[str]:
        with cls._lock:
            pending, cls._pending[:] = list(cls._pending), []
        return pending


@contextmanager
def _model(model: Any) -> Iterator[None]:
    if model is None:
        yield
        return
    token = model_in_use.set(_turn_model(model))
    try:
        yield
    finally:
        model_in_use.reset(token)


def _turn_model(model: Any) -> TurnModel | AsyncTurnModel:
    """A turn model as is; a pydantic-ai model (``TestModel``, ``FunctionModel``) wrapped."""
    if hasattr(model, "run") and not hasattr(model, "request"):
        return model
    # Here: the llm extra (pydantic-ai) is needed only for a pydantic-ai model.
    from poppy_django.agent.llm import PydanticAIModel

    return PydanticAIModel(model)


def answer_turns(*, model: Any = None) -> dict[str, list[str]]:
    """Answer the turns dispatched so far, now, on this thread and its connection.

    Returns the conversations answered, each with the pieces of text its model wrote.
    ``model``: a test's model for these turns instead of the settings' (a pydantic-ai model
    such as ``TestModel`` or ``FunctionModel``, or a turn model). A message is dispatched
    when its transaction commits, which a ``TestCase``'s never does: post it inside
    ``self.captureOnCommitCallbacks(execute=True)`` (:class:`PersonalAgentClient` does).
    """
    answered: dict[str, list[str]] = {}
    with _model(model):
        while pending := InlineExecutor.take_pending():
            for conversation_id in pending:
                written = answer_inline(conversation_id).deltas_written
                answered.setdefault(conversation_id, []).extend(text for _, _, text in written)
    return answered


def tool_context(
    *,
    account_id: str | None = None,
    scopes: Iterable[str] = (),
    client_id: str = DEFAULT_CLIENT_ID,
    user_id: str = "user-1",
    conversation_id: str = "cnv_test",
    page_context: dict[str, Any] | None = None,
) -> ToolContext:
    """The context a turn gives a tool, for a User signed out, or signed in to
    ``account_id`` with ``scopes``: the same actor and roles a turn would resolve
    (``POPPY["ACTOR_FOR"]`` included)."""
    principal = Principal(
        client_id=client_id,
        user_id=user_id,
        account_id=account_id,
        signed_in=account_id is not None,
        scopes=frozenset(scopes),
        token_type="PoppyFake",
    )
    return ToolContext(
        actor=resolve_actor(principal),
        roles=roles_of(principal),
        conversation_id=conversation_id,
        page_context=page_context or {},
    )


def call_tool(tool: Tool, ctx: ToolContext | None = None, /, **arguments: Any) -> Any:
    """Call a tool as a turn would: arguments validated, ``async def`` tools awaited."""
    ctx = ctx or tool_context()
    validated = tool.validate(arguments)
    result = tool.function(ctx, **validated)
    if hasattr(result, "__await__"):
        return async_to_sync(_awaited)(result)
    return result


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


@dataclass
class Reply:
    """What the personal agent got for one message: the POST's answer and the events after."""

    status_code: int
    body: dict[str, Any]
    conversation_id: str | None
    #: The conversation's events after the turn (a JSON read from the start).
    events: list[dict[str, Any]] = field(default_factory=list)
    #: The pieces of text the model wrote while answering (the stream's ``text-delta``).
    deltas: list[str] = field(default_factory=list)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [event["message"] for event in self.events if event["type"] == "message"]

    @property
    def company_messages(self) -> list[dict[str, Any]]:
        return [message for message in self.messages if message["role"] == "company"]

    @property
    def text(self) -> str | None:
        """The last company message's text (None: no reply)."""
        replies = self.company_messages
        return replies[-1].get("text") if replies else None

    @property
    def actions(self) -> list[dict[str, Any]]:
        """The last company message's ``data.actions`` (what was done, with each result)."""
        replies = self.company_messages
        data = (replies[-1].get("data") or {}) if replies else {}
        return list(data.get("actions", []))

    @property
    def authorization(self) -> dict[str, Any] | None:
        """The last ``authorization`` event (``sign_in_required``, ``insufficient_scope``)."""
        found = [event for event in self.events if event["type"] == "authorization"]
        return found[-1] if found else None

    @property
    def status(self) -> str | None:
        """The conversation's status after the turn (``idle``, ``queued``, ...)."""
        states = [event for event in self.events if event["type"] == "state"]
        return states[-1]["status"] if states else None


class PersonalAgentClient:
    """A personal agent acting for one User, over Django's test client.

    Signed out by default; ``account_id`` (and ``scopes``) signs the User in. Each
    :meth:`send` posts a message (starting a conversation, then continuing it), answers the
    turn inline and reads the events, under :func:`poppy_test_settings` (or equivalent).
    """

    def __init__(
        self,
        *,
        account_id: str | None = None,
        scopes: Iterable[str] = (),
        client_id: str = DEFAULT_CLIENT_ID,
        user_id: str | None = None,
        model: Any = None,
        client: Client | None = None,
        using: str = DEFAULT_DB_ALIAS,
    ) -> None:
        self.using = using
        self.account_id = account_id
        self.scopes = tuple(scopes)
        self.client_id = client_id
        self.user_id = user_id or f"user-{next(_ids)}"
        self.model = model
        self.client = client or Client()
        self.conversation_id: str | None = None

    def signed_in(self, account_id: str, scopes: Iterable[str] = ()) -> PersonalAgentClient:
        """The same User in the same conversation, signed in (a new token)."""
        other = PersonalAgentClient(
            account_id=account_id,
            scopes=scopes,
            client_id=self.client_id,
            user_id=self.user_id,
            model=self.model,
            client=self.client,
            using=self.using,
        )
        other.conversation_id = self.conversation_id
        return other

    def headers(self) -> dict[str, str]:
        """The request headers of this agent's credentials (for your own requests)."""
        return {
            "Authorization": fake_authorization(
                self.client_id, self.user_id, account_id=self.account_id, scopes=self.scopes
            )
        }

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """``POST`` JSON to the endpoint's ``path`` (``""``, ``"/<id>/messages"``, ...).

        What the request leaves to do once committed (a turn's dispatch) runs as it returns,
        in a ``TestCase`` too (whose transaction never commits).
        """
        with TestCase.captureOnCommitCallbacks(using=self.using, execute=True):
            return self.client.post(
                endpoint_prefix() + path,
                json.dumps(body),
                content_type="application/json",
                headers=self.headers(),
            )

    def get(self, path: str) -> Any:
        return self.client.get(endpoint_prefix() + path, headers=self.headers())

    def send(
        self, text: str | None = None, *, message_id: str | None = None, **message: Any
    ) -> Reply:
        """Send a message (``text``, ``data``, ``context``), answer its turn, read the events."""
        body = {
            "message": {
                "id": message_id or f"msg-{next(_ids)}",
                "sender": "agent",
                **({"text": text} if text is not None else {}),
                **message,
            }
        }
        path = f"/{self.conversation_id}/messages" if self.conversation_id else ""
        response = self.post(path, body)
        answer = _json(response)
        if response.status_code in (201, 202):
            self.conversation_id = answer.get("conversation_id", self.conversation_id)
        reply = Reply(response.status_code, answer, self.conversation_id)
        if response.status_code not in (201, 202):
            return reply
        deltas = self._answer()
        reply.events = self.events()
        reply.deltas = deltas
        return reply

    def handoff(self) -> Any:
        """Ask for a person (``POST …/handoff``)."""
        return self.post(f"/{self.conversation_id}/handoff", {})

    def close(self) -> Any:
        return self.post(f"/{self.conversation_id}/close", {})

    def events(self) -> list[dict[str, Any]]:
        """Every event of the conversation so far (JSON reads from the start)."""
        found: list[dict[str, Any]] = []
        cursor = ""
        while True:
            response = self.get(f"/{self.conversation_id}/events{cursor}")
            assert response.status_code == 200, response.content
            page = response.json()
            found.extend(page["events"])
            if not page["has_more"]:
                return found
            cursor = f"?cursor={page['cursor']}"

    def _answer(self) -> list[str]:
        answered = answer_turns(model=self.model)
        return answered.get(self.conversation_id or "", [])


def _json(response: Any) -> dict[str, Any]:
    try:
        loaded = json.loads(response.content or b"{}")
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


__all__ = [
    "FAKE_VERIFIER",
    "INLINE_EXECUTOR",
    "InlineExecutor",
    "PersonalAgentClient",
    "Reply",
    "answer_turns",
    "call_tool",
    "poppy_test_settings",
    "tool_context",
]
