"""With Celery, a message's turn and a confirmed operation are dispatched after their answer
(issue 54): the answer never waits on the broker, and the dispatch still carries the
request's id. (A broker that fails
is recorded as before: tests/ops/test_setup_mistakes.py; every multiprocess test's turn
goes through this dispatch to a real worker.)"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from celery.signals import before_task_publish
from django.test import Client

from poppy_django.engine import dispatch
from poppy_django.engine.broker_health import health
from poppy_django.engine.handover import MOST_QUEUED, Handover
from poppy_django.observe.tracing import REQUEST_ID_HEADER
from poppy_django.operations import perform, service
from poppy_django.verifier import Principal
from poppy_django.verifier.fake import fake_authorization
from tests.agents import PersonalAgent
from tests.multiprocess.cluster import free_port

CELERY = "poppy_django.engine.executors.CeleryExecutor"


class Publishes:
    """Celery's ``before_task_publish`` signal (its public hook, sent on the publishing thread
    before the message leaves): the headers of each publish, each held until :attr:`go` is
    set (a broker that hangs), at most 10 s."""

    def __init__(self) -> None:
        self.headers: list[dict[str, Any]] = []
        self.go = threading.Event()
        self.waiting = threading.Event()
        self.released = threading.Event()

    def __call__(self, headers: dict[str, Any], **kwargs: Any) -> None:
        self.headers.append(headers)
        self.waiting.set()
        self.go.wait(timeout=10)
        self.released.set()


@pytest.fixture
def publishes(settings) -> Iterator[Publishes]:
    """Turns through Celery, each publish seen (and held) first, then refused: the broker's
    port has no server (as in tests/ops/test_setup_mistakes.py, whose broker this
    process's Celery app may keep from an earlier test: both refuse)."""
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{free_port()}/0"
    settings.POPPY = {**settings.POPPY, "EXECUTOR": CELERY}
    seen = Publishes()
    before_task_publish.connect(seen)
    try:
        yield seen
    finally:
        seen.go.set()
        assert dispatch.flush(timeout=30) and perform.after_answer.flush(timeout=30)
        before_task_publish.disconnect(seen)
        health.succeeded()


@pytest.mark.django_db(transaction=True)
def test_the_answer_does_not_wait_for_the_broker(publishes: Publishes) -> None:
    response = PersonalAgent().start("hello")
    # Answered while the publish is still held: before, the request's thread made it, and
    # the answer waited for the broker as long as it took.
    answered_while_held = not publishes.released.is_set()
    assert response.status_code == 201, response.content
    assert answered_while_held
    assert publishes.waiting.wait(timeout=10)  # the dispatch is being made meanwhile
    publishes.go.set()
    assert dispatch.flush(timeout=30)
    (headers,) = publishes.headers
    # Made in the request's context: the worker's lines name the request that caused it.
    assert headers[REQUEST_ID_HEADER] == response["X-Request-ID"]
    assert headers["argsrepr"] == repr((response.json()["conversation_id"],))


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("shop_orders")
def test_a_confirmed_operation_is_answered_before_its_dispatch_too(
    publishes: Publishes, settings: Any
) -> None:
    # The answer at once, "in_progress" (not after waiting up to 10 s for the outcome, which
    # the held publish keeps from coming).
    operations = {**settings.POPPY["OPERATIONS"], "CONFIRM_WAIT_SECONDS": 0}
    settings.POPPY = {**settings.POPPY, "OPERATIONS": operations}
    owner = {"client_id": "https://agent.example/client", "user_id": "user-1"}
    operation = service.propose_for(
        Principal(**owner, account_id="acct-1", signed_in=True, scopes=frozenset({"poppy:write"})),
        "cancel_order",
        {"order_id": "A-2"},
        agent_name="support",
    )
    response = Client().post(
        f"/poppy/operations/{operation.operation_id}/confirm",
        data=json.dumps({"revision": 1, "approved_by": "user"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=fake_authorization(
            **owner, account_id="acct-1", scopes=("poppy:write",)
        ),
    )
    answered_while_held = not publishes.released.is_set()
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "in_progress"
    assert answered_while_held  # before, the confirming request's thread published
    assert publishes.waiting.wait(timeout=10)
    publishes.go.set()
    assert perform.after_answer.flush(timeout=30)
    (headers,) = publishes.headers
    assert headers["task"] == "poppy_django.perform_operation"
    assert headers["argsrepr"] == repr((operation.operation_id,))
    assert headers[REQUEST_ID_HEADER] == response["X-Request-ID"]


# -- the handover's own rules (its Python API) ------------------------------------------------


class Recorder:
    """A dispatch that records its calls, fails the ones named in ``failing`` and waits
    for ``gate`` before each."""

    def __init__(self, failing: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.failing = failing
        self.made: list[str] = []
        self.failed: list[tuple[str, str]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def dispatch(self, conversation_id: str) -> BaseException | None:
        self.entered.set()
        self.gate.wait(timeout=10)
        self.made.append(conversation_id)
        if conversation_id in self.failing:
            error = ConnectionRefusedError(111, "Connection refused")
            self.failed.append((conversation_id, "tried"))
            return error
        return None

    def fail(self, conversation_id: str, error: BaseException) -> None:
        self.failed.append((conversation_id, type(error).__name__))


def test_a_conversation_queued_twice_is_dispatched_once() -> None:
    recorder = Recorder()
    handover = Handover(recorder.dispatch, recorder.fail)
    recorder.gate.clear()
    handover.submit("busy")  # holds the thread while the next ones queue
    assert recorder.entered.wait(timeout=10)
    for conversation_id in ("a", "b", "a", "a"):
        handover.submit(conversation_id)
    recorder.gate.set()
    assert handover.flush(timeout=10)
    assert recorder.made == ["busy", "a", "b"]


def test_those_queued_behind_a_failed_dispatch_fail_at_once_and_later_ones_are_tried() -> None:
    recorder = Recorder(failing={"down"})
    handover = Handover(recorder.dispatch, recorder.fail)
    recorder.gate.clear()
    handover.submit("first")
    assert recorder.entered.wait(timeout=10)
    for conversation_id in ("down", "behind-1", "behind-2"):
        handover.submit(conversation_id)
    recorder.gate.set()
    assert handover.flush(timeout=10)
    assert recorder.made == ["first", "down"]  # the ones behind it waited out no timeout
    assert recorder.failed == [
        ("down", "tried"),
        ("behind-1", "ConnectionRefusedError"),
        ("behind-2", "ConnectionRefusedError"),
    ]
    handover.submit("after")
    assert handover.flush(timeout=10)
    assert recorder.made[-1] == "after"


def test_past_its_bound_a_dispatch_fails_at_once() -> None:
    recorder = Recorder()
    handover = Handover(recorder.dispatch, recorder.fail)
    recorder.gate.clear()
    handover.submit("busy")
    assert recorder.entered.wait(timeout=10)
    for number in range(MOST_QUEUED):
        handover.submit(f"c{number}")
    handover.submit("one-too-many")
    assert recorder.failed == [("one-too-many", "BacklogFull")]
    recorder.gate.set()
    assert handover.flush(timeout=30)
    assert len(recorder.made) == MOST_QUEUED + 1
