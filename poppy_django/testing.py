"""Test your own Company Agent in your own test suite (docs/testing.md).

Three levels, each usable in Django's ``TestCase`` (rolled back with the test) and
``TransactionTestCase``, under ``manage.py test`` or pytest-django, on SQLite or PostgreSQL:

- a tool called directly: ``my_tool(tool_context(account_id="acct-1"), day="friday")``;
- a conversation as a personal agent has it, through Django's test client:
  :class:`PersonalAgentClient` (signed out, or signed in with scopes) sends a message, the
  turn is answered inline on the test's thread and database connection, and the reply,
  its actions and the events are there to assert; :class:`AsyncPersonalAgentClient` is the
  same for ``async def`` tests, over Django's ``AsyncClient``;
- a test's own model for those turns: ``answer_turns(model=...)`` or
  ``PersonalAgentClient(model=...)`` takes a pydantic-ai model (``TestModel``,
  ``FunctionModel``) or any turn model, in place of ``POPPY["MODEL"]``.

:func:`poppy_test_settings` is the ``override_settings`` these need: the fake verifier
(which trusts the test client's ``PoppyFake`` header) and :class:`InlineExecutor` (turns wait
for the test instead of running on the engine's own threads and connections). In a test run
the app starts no background loop of its own (the recovery sweep) unless a test asks:
:func:`background_loops`. pytest-django's fixtures are in :mod:`poppy_django.pytest_plugin`.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS
from django.test import AsyncClient, Client, TestCase, override_settings

from poppy_django.agent import model_choice
from poppy_django.agent.model_api import AsyncTurnModel, TurnModel
from poppy_django.agent.model_choice import model_in_use
from poppy_django.agent.runtime import resolve_actor, roles_of
from poppy_django.agent.tools import Tool, ToolContext
from poppy_django.conf import endpoint_prefix
from poppy_django.engine.executors import background_loops
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
    settings' ``DEBUG``), turns answered by the test (:class:`InlineExecutor`), every read
    from the database (``TAIL_MAX_BYTES`` 0: a ``TestCase`` never commits, and the process's
    tail of recent events trusts what committed writes announce), and any ``POPPY`` keys you
    pass.

    As a class or method decorator, or a context manager, like ``override_settings``.
    """
    return override_settings(
        POPPY={
            **getattr(settings, "POPPY", {}),
            "AUTHENTICATE": FAKE_VERIFIER,
            "ALLOW_FAKE_VERIFIER_WITHOUT_DEBUG": True,
            "EXECUTOR": INLINE_EXECUTOR,
            "TAIL_MAX_BYTES": 0,
            **poppy,
        }
    )


class InlineExecutor:
    """``POPPY["EXECUTOR"]`` in tests: a dispatched conversation waits for :func:`answer_turns`.

    The process's engine answers on threads of its own, with connections of their own: a
    ``TestCase`` would never see (nor roll back) what they write, and SQLite would refuse
    them while the test holds its write lock.
    """

    #: Turns are answered when the test asks, on its thread: a conversation is noted as soon
    #: as its message is written (not once committed), and the endpoint's requests do their
    #: database work on the request's own thread (the test's, in Django's async tests), so
    #: what the test writes and reads is in its transaction.
    inline: ClassVar[bool] = True

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


@contextmanager
def turn_model(model: Any) -> Iterator[None]:
    """Every turn this process runs while the block lasts uses ``model`` (a pydantic-ai model
    such as ``TestModel`` or ``FunctionModel``, or a turn model), on whichever thread runs it:
    for a test whose turns the in-process engine runs on its own threads. (Turns a test
    answers itself take theirs from :func:`answer_turns`.)"""
    models = model_choice.process_models
    chosen = _turn_model(model)
    models.append(chosen)
    try:
        yield
    finally:
        models.remove(chosen)


def answer_turns(*, model: Any = None) -> dict[str, list[str]]:
    """Answer the turns dispatched so far, now, on this thread and its connection.

    Returns the conversations answered, each with the pieces of text its model wrote.
    ``model``: a test's model for these turns instead of the settings' (a pydantic-ai model
    such as ``TestModel`` or ``FunctionModel``, or a turn model). Under
    :func:`poppy_test_settings` a message's conversation waits here from the moment it is
    written, committed or not (a ``TestCase``'s transaction never commits). In an
    ``async def`` test, ``await aanswer_turns()``.
    """
    _not_in_an_event_loop("answer_turns")
    return async_to_sync(aanswer_turns)(model=model)


async def aanswer_turns(*, model: Any = None) -> dict[str, list[str]]:
    """:func:`answer_turns` for ``async def`` tests: the turns' database work runs where the
    test's thread-sensitive work does (the test's thread, in Django's async tests)."""
    answered: dict[str, list[str]] = {}
    with _model(model):
        while pending := InlineExecutor.take_pending():
            for conversation_id in pending:
                written = (await answer_inline(conversation_id)).deltas_written
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
    _not_in_an_event_loop("call_tool")
    return async_to_sync(acall_tool)(tool, ctx, **arguments)


async def acall_tool(tool: Tool, ctx: ToolContext | None = None, /, **arguments: Any) -> Any:
    """:func:`call_tool` for ``async def`` tests: a sync tool runs where the test's
    thread-sensitive work does (its database connection), an ``async def`` one is awaited."""
    if ctx is None:
        ctx = await sync_to_async(tool_context)()
    validated = tool.validate(arguments)
    if inspect.iscoroutinefunction(tool.function):
        return await tool.function(ctx, **validated)
    result = await sync_to_async(tool.function)(ctx, **validated)
    return await result if inspect.isawaitable(result) else result


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


class _PersonalAgent:
    """What both clients share: whom the personal agent acts for, its credentials, the
    conversation it continues, and the Django test client it speaks through (``client``:
    yours, else a new one)."""

    #: The Django test client a new agent speaks through.
    test_client: ClassVar[type[Client] | type[AsyncClient]]

    def __init__(
        self,
        *,
        account_id: str | None = None,
        scopes: Iterable[str] = (),
        client_id: str = DEFAULT_CLIENT_ID,
        user_id: str | None = None,
        model: Any = None,
        client: Any = None,
        using: str = DEFAULT_DB_ALIAS,
    ) -> None:
        self.using = using
        self.account_id = account_id
        self.scopes = tuple(scopes)
        self.client_id = client_id
        self.user_id = user_id or f"user-{next(_ids)}"
        self.model = model
        self.client = client or self.test_client()
        self.conversation_id: str | None = None

    def signed_in(self, account_id: str, scopes: Iterable[str] = ()) -> Self:
        """The same User in the same conversation, signed in (a new token)."""
        other = type(self)(
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

    def _message(
        self, text: str | None, message_id: str | None, message: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        """Where a message goes (a new conversation, or this one's) and its body."""
        body = {
            "message": {
                "id": message_id or f"msg-{next(_ids)}",
                "sender": "agent",
                **({"text": text} if text is not None else {}),
                **message,
            }
        }
        return (f"/{self.conversation_id}/messages" if self.conversation_id else ""), body

    def _posted(self, response: Any) -> Reply:
        """The POST's answer, the conversation kept for the next message."""
        answer = _json(response)
        if response.status_code in (201, 202):
            self.conversation_id = answer.get("conversation_id", self.conversation_id)
        return Reply(response.status_code, answer, self.conversation_id)


def _events_page(response: Any, found: list[dict[str, Any]]) -> str | None:
    """Add one JSON read's events to ``found``; the next page's query, or None at the end."""
    assert response.status_code == 200, response.content
    page = response.json()
    found.extend(page["events"])
    return f"?cursor={page['cursor']}" if page["has_more"] else None


class PersonalAgentClient(_PersonalAgent):
    """A personal agent acting for one User, over Django's test client.

    Signed out by default; ``account_id`` (and ``scopes``) signs the User in. Each
    :meth:`send` posts a message (starting a conversation, then continuing it), answers the
    turn inline and reads the events, under :func:`poppy_test_settings` (or equivalent).
    In an ``async def`` test, use :class:`AsyncPersonalAgentClient`.
    """

    test_client = Client
    client: Client

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """``POST`` JSON to the endpoint's ``path`` (``""``, ``"/<id>/messages"``, ...).

        What the request leaves to do once committed (signals, wake-ups) runs as it returns,
        in a ``TestCase`` too (whose transaction never commits).
        """
        _not_in_an_event_loop("PersonalAgentClient")
        with TestCase.captureOnCommitCallbacks(using=self.using, execute=True):
            return self.client.post(
                endpoint_prefix() + path,
                json.dumps(body),
                content_type="application/json",
                headers=self.headers(),
            )

    def get(self, path: str) -> Any:
        _not_in_an_event_loop("PersonalAgentClient")
        return self.client.get(endpoint_prefix() + path, headers=self.headers())

    def send(
        self, text: str | None = None, *, message_id: str | None = None, **message: Any
    ) -> Reply:
        """Send a message (``text``, ``data``, ``context``), answer its turn, read the events."""
        path, body = self._message(text, message_id, message)
        reply = self._posted(self.post(path, body))
        if reply.status_code in (201, 202):
            reply.deltas = answer_turns(model=self.model).get(self.conversation_id or "", [])
            reply.events = self.events()
        return reply

    def handoff(self) -> Any:
        """Ask for a person (``POST …/handoff``)."""
        return self.post(f"/{self.conversation_id}/handoff", {})

    def close(self) -> Any:
        return self.post(f"/{self.conversation_id}/close", {})

    def events(self) -> list[dict[str, Any]]:
        """Every event of the conversation so far (JSON reads from the start)."""
        found: list[dict[str, Any]] = []
        query: str | None = ""
        while query is not None:
            query = _events_page(self.get(f"/{self.conversation_id}/events{query}"), found)
        return found


class AsyncPersonalAgentClient(_PersonalAgent):
    """:class:`PersonalAgentClient` for ``async def`` tests, over Django's ``AsyncClient``:
    the same arguments, and its methods are awaited (``reply = await agent.send("hi")``).

    In a Django ``TestCase`` or ``TransactionTestCase`` (``manage.py test`` and pytest-django
    alike), the requests' database work and the turns run on the test's thread and
    connection, as the sync client's do: rolled back with a ``TestCase``, and no other
    connection left open. In a pytest function (``anyio`` or ``pytest-asyncio``), use
    pytest-django's ``transactional_db`` (the plugin's ``async_personal_agent`` fixture does).
    """

    test_client = AsyncClient
    client: AsyncClient

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        """``POST`` JSON to the endpoint's ``path``; what it leaves to do once committed
        runs as it returns (as :meth:`PersonalAgentClient.post`)."""
        async with _committed_callbacks_run(self.using):
            return await self.client.post(
                endpoint_prefix() + path,
                json.dumps(body),
                content_type="application/json",
                headers=self.headers(),
            )

    async def get(self, path: str) -> Any:
        return await self.client.get(endpoint_prefix() + path, headers=self.headers())

    async def send(
        self, text: str | None = None, *, message_id: str | None = None, **message: Any
    ) -> Reply:
        """Send a message (``text``, ``data``, ``context``), answer its turn, read the events."""
        path, body = self._message(text, message_id, message)
        reply = self._posted(await self.post(path, body))
        if reply.status_code in (201, 202):
            answered = await aanswer_turns(model=self.model)
            reply.deltas = answered.get(self.conversation_id or "", [])
            reply.events = await self.events()
        return reply

    async def handoff(self) -> Any:
        """Ask for a person (``POST …/handoff``)."""
        return await self.post(f"/{self.conversation_id}/handoff", {})

    async def close(self) -> Any:
        return await self.post(f"/{self.conversation_id}/close", {})

    async def events(self) -> list[dict[str, Any]]:
        """Every event of the conversation so far (JSON reads from the start)."""
        found: list[dict[str, Any]] = []
        query: str | None = ""
        while query is not None:
            query = _events_page(await self.get(f"/{self.conversation_id}/events{query}"), found)
        return found


@asynccontextmanager
async def _committed_callbacks_run(using: str) -> AsyncIterator[None]:
    """``TestCase.captureOnCommitCallbacks(execute=True)`` around an awaited request, entered
    and left where the request's database work runs (the test's thread)."""
    capture = TestCase.captureOnCommitCallbacks(using=using, execute=True)
    await sync_to_async(capture.__enter__)()
    try:
        yield
    except BaseException as exc:
        if not await sync_to_async(capture.__exit__)(type(exc), exc, exc.__traceback__):
            raise
    else:
        await sync_to_async(capture.__exit__)(None, None, None)


def _not_in_an_event_loop(what: str) -> None:
    """The sync kit inside an ``async def`` test: say which async counterpart to await."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(
        f"{what} is for sync tests: in an async def test, await its async counterpart "
        "(AsyncPersonalAgentClient, aanswer_turns, acall_tool)."
    )


def _json(response: Any) -> dict[str, Any]:
    try:
        loaded = json.loads(response.content or b"{}")
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


__all__ = [
    "FAKE_VERIFIER",
    "INLINE_EXECUTOR",
    "AsyncPersonalAgentClient",
    "InlineExecutor",
    "PersonalAgentClient",
    "Reply",
    "aanswer_turns",
    "acall_tool",
    "answer_turns",
    "background_loops",
    "call_tool",
    "poppy_test_settings",
    "tool_context",
    "turn_model",
]
