"""On a Redis cache the replay check and the rate limit are one command each (issue 28):
the process's redis-py client (``process_cache.shared_redis``) sends ``SET NX EX`` and one
script, with the keys and values Django's own backend uses, so either path reads what the
other wrote. Any other cache (or a Redis cache with ``OPTIONS``) keeps Django's API."""

from __future__ import annotations

import asyncio
import os
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from django.test import Client, override_settings

from poppy_django import process_cache
from poppy_django.api import throttling
from poppy_django.client import DPoPKey
from poppy_django.fanout import bus, versions
from poppy_django.process_cache import shared_cache, shared_redis
from poppy_django.verifier import dpop, replay
from tests.agents import PersonalAgent
from tests.auth.conftest import dpop_poppy
from tests.auth.support import ENDPOINT_URL, NOW, Issuer, proof
from tests.waiting import Clock
from tests.wire.wire_support import assert_error, poppy, quiet_start, rows

REDIS_URL = os.environ.get("POPPY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
REDIS_CACHE = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}


@pytest.fixture
def redis_cache(settings: Any) -> Any:
    """The default cache on Redis; the redis-py client's commands counted. Set through
    ``settings``, as a test's own changes are: its restores then come in order (an
    ``override_settings`` block here, left before ``settings`` put back a change the test made
    inside it, left this cache in place for every later test)."""
    settings.CACHES = {**settings.CACHES, "default": REDIS_CACHE}
    client = shared_redis("default")
    assert client is not None
    client.commands = []
    execute = client.execute_command

    def counted(*args: Any, **options: Any) -> Any:
        client.commands.append(args[0])
        return execute(*args, **options)

    client.execute_command = counted
    return client


def test_a_proof_is_accepted_once_in_one_command(redis_cache: Any) -> None:
    jti = os.urandom(8).hex()
    assert replay.first_use("jkt", jti, ttl=60)
    assert redis_cache.commands == ["SET"]
    assert not replay.first_use("jkt", jti, ttl=60)
    assert redis_cache.commands == ["SET", "SET"]


def test_the_replay_mark_is_the_one_djangos_add_would_write(redis_cache: Any) -> None:
    jti = os.urandom(8).hex()
    assert replay.first_use("jkt", jti, ttl=60)
    import hashlib

    digest = hashlib.sha256(f"jkt\x00{jti}".encode()).hexdigest()
    backend = shared_cache("default")
    assert backend.get(replay.PREFIX + digest) == 1
    assert not backend.add(replay.PREFIX + digest, 1, timeout=60)


@pytest.mark.django_db
def test_the_rate_limit_refuses_past_the_rate_counting_in_one_command_a_request(
    redis_cache: Any, agent: PersonalAgent, throttle_clock: Clock
) -> None:
    conversation_id = quiet_start(agent)
    with poppy(THROTTLE_RATES={"message": "2/hour"}):
        assert agent.send(conversation_id, None, context={"n": 1}).status_code == 202
        redis_cache.commands.clear()
        assert agent.send(conversation_id, None, context={"n": 2}).status_code == 202
        assert redis_cache.commands == ["EVALSHA"]
        before = rows()
        assert_error(agent.send(conversation_id, None, context={"n": 3}), 429, "too_many_requests")
        assert rows() == before


@pytest.mark.django_db
def test_a_dpop_read_costs_one_command_and_a_message_two(redis_cache: Any, settings: Any) -> None:
    """Through the endpoint with the DPoP verifier: the replay check's ``SET`` on every
    request, the rate limit's script on a message (the conversation need not exist: both run
    before the view looks it up)."""
    issuer = Issuer()
    dpop_poppy(settings, issuer)
    dpop.reset()
    dpop.get_verifier().clock = lambda: NOW
    key = DPoPKey()
    token = issuer.token(jkt=key.thumbprint, now=NOW)
    suffix = f"/cnv_{os.urandom(6).hex()}"

    def send(method: str, route: str) -> int:
        signed = proof(key, method, ENDPOINT_URL + suffix + route, token, now=NOW)
        headers = {"HTTP_AUTHORIZATION": f"DPoP {token}", "HTTP_DPOP": signed}
        path = "/poppy/conversations" + suffix + route
        if method == "GET":
            return Client().get(path, **headers).status_code
        return (
            Client().post(path, data="{}", content_type="application/json", **headers).status_code
        )

    try:
        # The steady state: a server that has the rate limit's script (the first request a
        # fresh server ever counts also sends SCRIPT LOAD, whichever test comes first).
        redis_cache.script_load(throttling._WINDOW_COUNT)
        for _ in range(2):  # the first request (proof header not yet remembered) and a hot one
            redis_cache.commands.clear()
            assert send("GET", "/events") == 404
            assert redis_cache.commands == ["SET"]
        redis_cache.commands.clear()
        assert send("POST", "/messages") == 404
        assert redis_cache.commands == ["SET", "EVALSHA"]
    finally:
        dpop.reset()


def test_a_redis_cache_with_options_keeps_djangos_api(settings: Any) -> None:
    configured = {**REDIS_CACHE, "OPTIONS": {"db": "0"}}
    with override_settings(CACHES={**settings.CACHES, "default": configured}):
        assert shared_redis("default") is None
        jti = os.urandom(8).hex()
        assert replay.first_use("jkt", jti, ttl=60)
        assert not replay.first_use("jkt", jti, ttl=60)
    process_cache.forget()


def test_another_backend_keeps_djangos_api(settings: Any) -> None:
    local = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    with override_settings(CACHES={**settings.CACHES, "default": local}):
        assert shared_redis("default") is None
        jti = os.urandom(8).hex()
        assert replay.first_use("jkt", jti, ttl=60)
        assert not replay.first_use("jkt", jti, ttl=60)
    process_cache.forget()


def test_a_write_sets_its_version_and_publishes_its_nudge_in_one_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fan-out's versioned publish (a write's, on commit) is one script, whether it sets
    the version or keeps a later write's there (its publish landed first)."""
    url = urlsplit(REDIS_URL)
    fanout_redis = {"host": url.hostname, "port": url.port or 6379, "db": int(url.path[1:] or 0)}
    key = f"poppy-round-trips-{os.urandom(6).hex()}"
    commands: list[str] = []
    execute = redis.Redis.execute_command

    def counted(client: redis.Redis, *args: Any, **options: Any) -> Any:
        commands.append(args[0])
        return execute(client, *args, **options)

    with override_settings(EVENTSTREAM_REDIS=fanout_redis):
        bus.publish(key, "poppy.test", {}, version="5.1.n")  # the server has the script now
        monkeypatch.setattr(redis.Redis, "execute_command", counted)
        bus.publish(key, "poppy.test", {}, version="7.1.n")
        bus.publish(key, "poppy.test", {}, version="6.1.n")
        monkeypatch.undo()
        assert asyncio.run(versions.current_version(key)) == "7.1.n"
    assert commands == ["EVALSHA", "EVALSHA"]
