"""Two deployments on one Redis server never see each other's wake-ups or text deltas.

Pub/sub is server-wide whatever the database number, so each deployment's bus channel (and
its django-eventstream channel names) carry its namespace: ``POPPY["REDIS_PREFIX"]`` and the
database number of ``EVENTSTREAM_REDIS``. Here two deployments share the test Redis server
with different database numbers, each with its own event loop and subscription (the bus
holds one per loop, as each process of a deployment does), and publish for the same
conversation id.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from django.test import override_settings

from poppy_django import fanout
from poppy_django.fanout import bus
from poppy_django.fanout.listening import ConversationListener
from poppy_django.verifier import revocations

CONVERSATION = "cnv_shared_between_deployments"


class Deployment:
    """One deployment: its Redis settings and an event loop of its own on a thread."""

    def __init__(self, redis_kwargs: dict[str, Any], prefix: str) -> None:
        self.redis_kwargs = redis_kwargs
        self.prefix = prefix
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.listener: ConversationListener | None = None

    @contextmanager
    def settings(self) -> Iterator[None]:
        with override_settings(EVENTSTREAM_REDIS=self.redis_kwargs):
            from django.conf import settings

            with override_settings(POPPY={**settings.POPPY, "REDIS_PREFIX": self.prefix}):
                yield

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    def listen(self) -> None:
        """Open a reader of the shared conversation id; return once subscribed."""

        async def opened() -> tuple[bool, list[Any]]:
            self.listener = ConversationListener(CONVERSATION)
            self.listener.open()
            return await self.listener.receive(timeout=20)  # the subscription's poke

        with self.settings():
            assert self.run(opened()) == (True, [])
            self.channel = bus.redis_channel()

    def until(self, text: str) -> list[str]:
        """Every delta's text received until ``text`` (and a nudge) arrived, in order.

        Redis delivers in the order messages were published: what another deployment
        published before ``text`` would be among them, had it leaked.
        """
        assert self.listener is not None
        texts: list[str] = []
        nudged = False
        for _ in range(20):
            woken, deltas = self.run(self.listener.wait(20))
            nudged = nudged or woken
            texts += [delta.text for delta in deltas]
            if text in texts and nudged:
                return texts
        raise AssertionError(f"{text!r} never arrived: {texts}")

    def publish(self, text: str) -> None:
        with self.settings():
            fanout.publish_delta(CONVERSATION, "msg_1", text)
            bus.publish(fanout.conversation_channel(CONVERSATION), fanout.NUDGE, {"seq": 7})

    def stop(self) -> None:
        if self.listener is not None:
            self.listener.close()

        async def cancel() -> None:
            task = bus._subscriptions.get(self.loop)
            if task is not None:
                task.cancel()

        self.run(cancel())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@pytest.fixture
def deployments() -> Iterator[tuple[Deployment, Deployment]]:
    url = urlsplit(os.environ.get("POPPY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
    db = int(url.path.strip("/") or 0)
    server = {"host": url.hostname, "port": url.port or 6379}
    prefix = f"poppy-test-{os.getpid()}"  # the server is shared with other test runs
    staging = Deployment({**server, "db": db}, prefix)
    production = Deployment({**server, "db": (db + 1) % 16}, prefix)
    yield staging, production
    staging.stop()
    production.stop()


def test_two_deployments_on_one_redis_server_see_only_their_own_messages(
    deployments: tuple[Deployment, Deployment],
) -> None:
    staging, production = deployments
    staging.listen()
    production.listen()
    assert staging.channel != production.channel
    production.publish("production's first reply")
    staging.publish("staging's first reply")
    assert staging.until("staging's first reply") == ["staging's first reply"]
    staging.publish("staging's second reply")
    production.publish("production's second reply")
    assert production.until("production's second reply") == [
        "production's first reply",
        "production's second reply",
    ]


def test_the_namespace_is_the_prefix_and_the_database_number() -> None:
    with override_settings(EVENTSTREAM_REDIS={"host": "127.0.0.1", "db": 6}):
        assert bus.redis_channel() == "poppy:6:fanout"
        assert fanout.desk_channel() == "poppy-desk@poppy:6"
        assert fanout.conversation_channel("cnv_1") == "poppy-cnv_1@poppy:6"
        # Sign-outs announced to every process (poppy_django.verifier.revocations) too.
        assert revocations.channel() == "poppy:6:session-revoked"
    with override_settings(EVENTSTREAM_REDIS=None):
        assert bus.redis_channel() == "poppy:0:fanout"


def test_another_deployments_message_is_not_even_received(
    deployments: tuple[Deployment, Deployment], caplog: pytest.LogCaptureFixture
) -> None:
    """What another project publishes (even junk, on its own namespace or the old shared
    channel name) reaches no reader and logs nothing."""
    staging, _ = deployments
    staging.listen()
    kwargs = staging.redis_kwargs
    client = redis.Redis(host=kwargs["host"], port=kwargs["port"])
    try:
        for channel in ("poppy:fanout", f"{staging.prefix}:{(kwargs['db'] + 1) % 16}:fanout"):
            client.publish(channel, "not json")
            client.publish(channel, '{"key": "poppy-x", "type": "poppy.delta", "data": {}}')
    finally:
        client.close()
    staging.publish("staging's reply")
    assert staging.until("staging's reply") == ["staging's reply"]
    assert not [r for r in caplog.records if r.name == "poppy_django.fanout"]
