"""Request threads (poppy_django.threads): lent to an endpoint request from a pool, and
given back by a waiting reader (asgiref internals: fails loudly when an asgiref release
changes how thread-sensitive contexts keep their thread).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.signals import request_started

from poppy_django.threads import lent_request_thread, release_request_thread, request_threads
from tests.agents import ENDPOINT
from tests.threaded_server import serve


def current() -> threading.Thread:
    return threading.current_thread()


async def thread_sensitive_thread() -> threading.Thread:
    return await sync_to_async(current, thread_sensitive=True)()


def test_release_request_thread_ends_the_thread_the_request_context_holds():
    async def scenario() -> tuple[threading.Thread, threading.Thread, bool]:
        async with ThreadSensitiveContext():  # as Django's ASGI handler runs each request
            held = await sync_to_async(threading.current_thread, thread_sensitive=True)()
            release_request_thread()
            await asyncio.to_thread(held.join, 10)
            alive = held.is_alive()
            # A later thread-sensitive call of the same request still runs, on a new thread.
            later = await sync_to_async(threading.current_thread, thread_sensitive=True)()
        return held, later, alive

    held, later, alive = asyncio.run(scenario())
    assert held is not threading.main_thread()
    assert not alive
    assert later is not held


def test_release_request_thread_outside_a_request_leaves_every_request_its_thread():
    """Called where no request runs (a bare loop, a plain thread), it ends no request's
    thread: a request in progress keeps the one it has."""

    async def scenario() -> tuple[threading.Thread, threading.Thread]:
        holding, finish = asyncio.Event(), asyncio.Event()

        async def request() -> tuple[threading.Thread, threading.Thread]:
            async with ThreadSensitiveContext():
                first = await sync_to_async(threading.current_thread, thread_sensitive=True)()
                holding.set()
                await finish.wait()
                again = await sync_to_async(threading.current_thread, thread_sensitive=True)()
            return first, again

        task = asyncio.create_task(request())
        await holding.wait()
        release_request_thread()  # this task runs in no request's context
        await asyncio.to_thread(release_request_thread)  # nor does a plain thread
        finish.set()
        return await task

    first, again = asyncio.run(scenario())
    assert again is first


def test_a_lent_request_thread_serves_the_next_request_too():
    async def scenario() -> tuple[threading.Thread, threading.Thread, threading.Thread]:
        async with lent_request_thread():
            first = await thread_sensitive_thread()
            again = await thread_sensitive_thread()
        assert again is first  # one thread for the whole request, as Django's
        async with lent_request_thread():
            second = await thread_sensitive_thread()
        return first, second, again

    first, second, _ = asyncio.run(scenario())
    assert second is first and first.is_alive()  # started once, kept for the next request
    assert first.name.startswith("poppy-request")


def test_requests_at_once_each_have_a_thread_of_their_own():
    async def scenario() -> set[threading.Thread]:
        inside, leave = asyncio.Barrier(3), asyncio.Event()

        async def request() -> threading.Thread:
            async with lent_request_thread():
                mine = await thread_sensitive_thread()
                await inside.wait()
                await leave.wait()
                assert await thread_sensitive_thread() is mine
                return mine

        tasks = [asyncio.create_task(request()) for _ in range(2)]
        await inside.wait()
        leave.set()
        return set(await asyncio.gather(*tasks))

    assert len(asyncio.run(scenario())) == 2


def test_a_waiting_reader_gives_its_lent_thread_back_to_the_pool():
    async def scenario() -> tuple[threading.Thread, threading.Thread, threading.Thread, int, int]:
        async with lent_request_thread():
            lent = await thread_sensitive_thread()
            idle = request_threads.idle()
            release_request_thread()  # the reader starts waiting
            assert request_threads.idle() == idle + 1
            async with lent_request_thread():  # another request meanwhile gets that thread
                meanwhile = await thread_sensitive_thread()
            later = await thread_sensitive_thread()  # request_finished's moment: lent again
            during = request_threads.idle()
        return lent, meanwhile, later, during - idle, request_threads.idle() - idle

    lent, meanwhile, later, during, after = asyncio.run(scenario())
    assert meanwhile is lent and lent.is_alive()
    # The reader's later call is lent a pooled thread again (none started for it), and
    # gives it back with its request.
    assert later.name.startswith("poppy-request") and later.is_alive()
    assert (during, after) == (0, 1)


def test_a_reader_that_gave_its_thread_back_leaves_it_to_the_request_it_went_to():
    """The reader's own end must not end another request's loan of the same thread."""

    async def scenario() -> tuple[threading.Thread, threading.Thread, int, int]:
        reader_done, released, other_has_it = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def reader() -> threading.Thread:
            async with lent_request_thread():
                mine = await thread_sensitive_thread()
                release_request_thread()  # starts waiting
                released.set()
                await other_has_it.wait()
            reader_done.set()
            return mine

        async def other() -> tuple[threading.Thread, int]:
            await released.wait()
            async with lent_request_thread():
                first = await thread_sensitive_thread()
                other_has_it.set()
                await reader_done.wait()
                idle_meanwhile = request_threads.idle()
                assert await thread_sensitive_thread() is first  # still its own
            return first, idle_meanwhile

        idle = request_threads.idle()
        (theirs, idle_meanwhile), mine = await asyncio.gather(other(), reader())
        return mine, theirs, idle_meanwhile - idle, request_threads.idle() - idle

    mine, theirs, idle_meanwhile, idle_after = asyncio.run(scenario())
    assert theirs is mine  # the thread the reader gave back went to the other request
    assert idle_meanwhile == -1  # not back in the pool while the other request holds it
    assert idle_after == 0  # and back exactly once


def test_idle_request_threads_beyond_the_pool_are_ended(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(request_threads, "keep", 0)

    async def scenario() -> threading.Thread:
        async with lent_request_thread():
            return await thread_sensitive_thread()

    lent = asyncio.run(scenario())
    lent.join(10)
    assert not lent.is_alive()


@pytest.fixture
def served() -> Iterator[str]:
    from example_project.asgi import application

    with serve(application) as url:
        yield url


@pytest.mark.django_db(transaction=True)
def test_endpoint_requests_run_on_lent_threads_not_a_new_one_each(served: str):
    """Through the example project's ASGI application: Django's own thread-sensitive calls
    (its ``request_started`` receivers) of one request after another run on kept threads,
    where Django's handler alone starts (and joins) a thread per request."""
    threads: list[threading.Thread] = []

    def seen(**kwargs: Any) -> None:
        threads.append(threading.current_thread())

    request_started.connect(seen)
    try:
        with httpx.Client(base_url=served) as client:
            for _ in range(10):
                assert client.get(f"{ENDPOINT}/cnv_unknown/events").status_code == 401
            assert client.get("/.well-known/poppy.json").status_code in (200, 400)
    finally:
        request_started.disconnect(seen)
    endpoint, elsewhere = threads[:10], threads[10]
    # Kept and lent again: a request whose tail (request_finished) still runs when the client
    # sends the next one has its thread still, so the next is lent another.
    assert all(thread.name.startswith("poppy-request") for thread in endpoint)
    assert len(set(endpoint)) <= 5  # (10 under Django alone: a new thread each)
    assert not elsewhere.name.startswith("poppy-request")  # other paths: Django's own way
