"""The endpoint's requests under a real server with a sync-only middleware in the chain (as
WhiteNoise's is in the tutorial's production settings): reads, long-polls and their request
signals."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import sentry_sdk
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.core.signals import request_finished, request_started
from django.db import connection
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from sentry_sdk.integrations.django import DjangoIntegration
from sentry_sdk.transport import Transport

from poppy_django.asgi import PoppyBodyLimit
from poppy_django.fanout.listening import waiting_readers
from poppy_django.threads import RequestThreads, lent_request_thread, runs_on_loop
from tests.agents import ENDPOINT, PersonalAgent
from tests.staff import company_message
from tests.threaded_server import serve
from tests.waiting import eventually

pytestmark = pytest.mark.django_db(transaction=True)

SYNC_ONLY = "tests.stream.test_request_signals.SyncOnlyMiddleware"


class SyncOnlyMiddleware:
    """A middleware that is sync only and not hook-only (WhiteNoise's shape): it calls the
    rest of the chain from its thread, which waits there for the answer."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        response["X-Sync-Only"] = str(threading.get_ident())
        return response


@pytest.fixture
def served(settings) -> Iterator[str]:
    """The application as a project serves it, its middleware read with the sync-only one."""
    middleware = list(settings.MIDDLEWARE)
    middleware.insert(
        middleware.index("django.middleware.security.SecurityMiddleware") + 1, SYNC_ONLY
    )
    settings.MIDDLEWARE = middleware
    with serve(PoppyBodyLimit(ASGIHandler())) as url:
        yield url


def test_long_polls_through_a_sync_only_middleware_answer(served: str):
    """Readers waiting at once (each holding the sync-only middleware's thread while it
    waits, as the tutorial's long-polls through WhiteNoise do) are answered, and so is a read
    served meanwhile, on a thread of its own."""
    agent = PersonalAgent().at(served)
    conversation_id = agent.start("hello").json()["conversation_id"]
    cursor = agent.settled(conversation_id)[-1]["id"]

    def long_poll(_: int) -> Any:
        return agent.read(conversation_id, f"?cursor={cursor}&wait=25")

    with ThreadPoolExecutor(4) as pool:
        polls = [pool.submit(long_poll, n) for n in range(4)]
        eventually(lambda: _waiting(conversation_id) == 4, what="four readers to wait")
        meanwhile = agent.read(conversation_id)
        company_message(conversation_id, "wake up")
        waiting = [poll.result() for poll in polls]
    for response in [*waiting, meanwhile]:
        assert response.status_code == 200, response.text
    for page in waiting:
        assert [event["message"]["text"] for event in page.json()["events"]] == ["wake up"]
    # Each waiter's thread stayed with it (the middleware waits there): the read meanwhile
    # was not lent one of them, to wait behind it (as it did when a waiting reader gave
    # back the thread the middleware was blocked on).
    held = {response.headers["X-Sync-Only"] for response in waiting}
    assert len(held) == 4 and meanwhile.headers["X-Sync-Only"] not in held


def _waiting(conversation_id: str) -> int:
    return sum(reader.conversation_id == conversation_id for reader in waiting_readers())


@pytest.fixture
def plain() -> Iterator[str]:
    with serve(PoppyBodyLimit(ASGIHandler()), name="plain-uvicorn") as url:
        yield url


@dataclass
class Receivers:
    """A sync receiver of ``request_started`` and one of ``request_finished``, connected for
    the test; ``ran`` has each call's moment and the thread it ran on."""

    started: Callable[..., None]
    finished: Callable[..., None]
    ran: list[tuple[str, str]]


def _connected(*, loop_safe: bool) -> Iterator[Receivers]:
    ran: list[tuple[str, str]] = []

    def started(**kwargs: Any) -> None:
        ran.append(("started", threading.current_thread().name))

    def finished(**kwargs: Any) -> None:
        ran.append(("finished", threading.current_thread().name))

    if loop_safe:
        runs_on_loop(started)
        runs_on_loop(finished)
    request_started.connect(started)
    request_finished.connect(finished)
    try:
        yield Receivers(started, finished, ran)
    finally:
        request_started.disconnect(started)
        request_finished.disconnect(finished)


@pytest.fixture
def loop_safe_receivers() -> Iterator[Receivers]:
    """The receivers declared loop-safe (``runs_on_loop``), as a library's may be."""
    yield from _connected(loop_safe=True)


@pytest.fixture
def project_receivers() -> Iterator[Receivers]:
    """The receivers as a project's own: sync, not declared loop-safe."""
    yield from _connected(loop_safe=False)


def test_an_endpoint_read_whose_signal_receivers_are_loop_safe_takes_no_thread(
    plain: str, loop_safe_receivers: Receivers
):
    """Django's own receivers and those declared loop-safe run on the event loop: a read
    answered there (here, a 401) is lent no thread. (Reads Django's receivers as
    ``Signal.asend`` does: fails when a Django release changes that.)"""
    ran = loop_safe_receivers.ran
    for _ in range(3):
        assert httpx.get(f"{plain}{ENDPOINT}/cnv_unknown/events").status_code == 401
    # (request_finished is sent once the response is out: after the client has it.)
    eventually(lambda: len(ran) == 6, what="the last read to be closed")
    # A POST keeps its thread for them (measured: RequestExecutor).
    assert httpx.post(f"{plain}{ENDPOINT}", json={}).status_code == 401
    eventually(lambda: len(ran) == 8, what="the POST to be closed")
    assert ran[:6] == [("started", "plain-uvicorn"), ("finished", "plain-uvicorn")] * 3
    assert [moment for moment, _ in ran[6:]] == ["started", "finished"]
    assert all(thread.startswith("poppy-request") for _, thread in ran[6:])


class _Dropped(Transport):
    """Sends nothing (sentry-sdk's transport interface)."""

    def capture_envelope(self, envelope: Any) -> None:
        pass


@pytest.fixture
def with_sentry() -> Iterator[None]:
    """Sentry as docs/operations.md sets it up, its Django integration on (as it is by
    default in a Django project) and tracing on, so that its receiver wrappers time spans."""
    sentry_sdk.init(
        dsn="https://public@sentry.example/1",
        transport=_Dropped(),
        integrations=[DjangoIntegration()],
        traces_sample_rate=1.0,
    )
    yield
    sentry_sdk.get_client().close()
    sentry_sdk.init()  # no DSN: off (its patches of Django stay, for the whole process)


def test_receivers_in_sentrys_wrappers_run_on_the_loop_as_they_would_bare(
    with_sentry: None, plain: str, loop_safe_receivers: Receivers
):
    """Sentry's Django integration returns each receiver in a new wrapper every time the
    receivers are read (for its spans), for the rest of the process: they are judged by the
    receivers they wrap, so an endpoint read under Sentry still takes no thread for them (it
    did, in any test session that had set up Sentry before, and in any project using it)."""
    started, ran = loop_safe_receivers.started, loop_safe_receivers.ran
    [*wrapped], _ = request_started._live_receivers(ASGIHandler)
    assert started not in wrapped and started in [r.__wrapped__ for r in wrapped]
    assert httpx.get(f"{plain}{ENDPOINT}/cnv_unknown/events").status_code == 401
    eventually(lambda: len(ran) == 2, what="the read to be closed")
    assert ran == [("started", "plain-uvicorn"), ("finished", "plain-uvicorn")]


def test_a_sync_receiver_of_the_project_keeps_a_thread(plain: str, project_receivers: Receivers):
    """A project's own sync receiver (not declared loop-safe) may need its thread: both
    signals then run on the request's lent thread, as Django runs them."""
    ran = project_receivers.ran
    assert httpx.get(f"{plain}{ENDPOINT}/cnv_unknown/events").status_code == 401
    eventually(lambda: len(ran) == 2, what="the request to be closed")
    (first, on), (then, later) = ran
    assert (first, then) == ("started", "finished")
    assert on.startswith("poppy-request") and later.startswith("poppy-request")


def test_the_thread_a_request_then_uses_has_its_old_connections_closed_first():
    """``request_started`` ran on the loop, so Django's ``close_old_connections`` there
    closed none of the thread's: the request's first call on its lent thread closes them
    first (a connection past its age is not used again), as Django's receiver would have."""
    threads = RequestThreads(keep=1)

    async def request(call: Callable[[], Any]) -> Any:
        async with lent_request_thread(threads, sender=ASGIHandler) as executor:
            executor.signal_next(request_started)
            await request_started.asend(sender=ASGIHandler)
            return await sync_to_async(call, thread_sensitive=True)()

    def connect_past_its_age() -> threading.Thread:
        connection.ensure_connection()
        connection.close_at = time.monotonic() - 1
        return threading.current_thread()

    def connected() -> tuple[threading.Thread, bool]:
        return threading.current_thread(), connection.connection is not None

    with ThreadPoolExecutor(1) as loop_thread:  # a loop on a thread holding no connection
        first = loop_thread.submit(asyncio.run, request(connect_past_its_age)).result()
        again, still_connected = loop_thread.submit(asyncio.run, request(connected)).result()
    assert again is first  # the same lent thread
    assert not still_connected


def test_a_loop_holding_a_connection_leaves_the_signals_to_a_thread(monkeypatch):
    """The loop should hold no connection (Django refuses the ORM there unless
    ``DJANGO_ALLOW_ASYNC_UNSAFE`` is set); if it does, Django's ``close_old_connections``
    would check it there, a blocking call: the signal's receivers then run on a thread."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ran: list[str] = []

    def started(**kwargs: Any) -> None:
        ran.append(threading.current_thread().name)

    async def request() -> None:
        connection.ensure_connection()  # on the loop, as the setting allows
        try:
            threads = RequestThreads(keep=0)
            async with lent_request_thread(threads, sender=ASGIHandler) as executor:
                executor.signal_next(request_started)
                await request_started.asend(sender=ASGIHandler)
        finally:
            connection.close()

    runs_on_loop(started)
    request_started.connect(started)
    try:
        with ThreadPoolExecutor(1, thread_name_prefix="loop") as loop_thread:
            loop_thread.submit(asyncio.run, request()).result()
    finally:
        request_started.disconnect(started)
    [on] = ran
    assert on.startswith("poppy-request")
