"""How many turns wait in the Celery broker's queue: the backlog no other metric shows.

A worker consuming another queue, or none running, leaves every dispatched turn in the
broker; the recovery sweep answers them late (``LEASE_SECONDS`` + ``SWEEP_SECONDS``), and
nothing else tells that they waited there. With a Redis broker a queue is a Redis list (one
more per priority step, named ``<queue>\\x06\\x16<step>`` by kombu's Redis transport), so
its length is one ``LLEN`` each; read by :mod:`poppy_django.observe.readings` off the
metrics' collection, with short socket timeouts so a Redis that hangs fails the read
rather than holding it.
"""

from __future__ import annotations

from typing import Any

from poppy_django.conf import poppy_settings

#: kombu's Redis transport: the separator of a queue's priority lists, and its steps.
PRIORITY_SEPARATOR = "\x06\x16"
PRIORITY_STEPS = (0, 3, 6, 9)
#: Seconds a Redis connection or answer may take before the read counts as failed.
TIMEOUT = 2


def uses_celery() -> bool:
    """Whether turns are dispatched through Celery (``POPPY["EXECUTOR"]``)."""
    executor = poppy_settings.raw("EXECUTOR")
    name = executor if isinstance(executor, str) else getattr(executor, "__name__", "")
    return str(name).rsplit(".", 1)[-1] == "CeleryExecutor"


def queue_keys(queue: str, steps: tuple[int, ...] = PRIORITY_STEPS) -> list[str]:
    """The Redis lists holding ``queue``'s messages (step 0 is the queue's own name)."""
    return [queue if step == 0 else f"{queue}{PRIORITY_SEPARATOR}{step}" for step in steps]


def depths() -> dict[str, Any]:
    """Messages waiting in each queue this deployment dispatches to, by queue name; {} where
    turns are not dispatched through a Redis broker."""
    if not uses_celery():
        return {}
    from celery import current_app

    url = str(current_app.conf.broker_url or "")
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return {}
    import redis

    queue = str(current_app.conf.task_default_queue)
    options = current_app.conf.broker_transport_options or {}
    steps = tuple(options.get("priority_steps", PRIORITY_STEPS))
    client = redis.Redis.from_url(url, socket_connect_timeout=TIMEOUT, socket_timeout=TIMEOUT)
    try:
        with client.pipeline(transaction=False) as pipe:
            for key in queue_keys(queue, steps):
                pipe.llen(key)
            lengths = pipe.execute()
    finally:
        client.close()
    return {queue: sum(int(length) for length in lengths)}
