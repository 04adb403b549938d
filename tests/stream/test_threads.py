"""The request thread a waiting reader gives back (poppy_django.api.threads, asgiref internals).

Fails loudly when an asgiref release changes how thread-sensitive contexts keep their thread.
"""

from __future__ import annotations

import asyncio
import threading

from asgiref.sync import ThreadSensitiveContext, sync_to_async

from poppy_django.api.threads import release_request_thread


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
