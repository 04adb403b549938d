"""A Celery app whose worker dies (SIGKILL) whenever it starts a turn answering a "poison-"
message: the message a real worker would crash on every time (say, one that runs it out of
memory). ``celery -A tests.multiprocess.poison_worker worker``.
"""

import os
import signal
from typing import Any

from django.dispatch import receiver

from example_project.celery import app
from poppy_django.signals import turn_started

__all__ = ["app"]


@receiver(turn_started)
def die_on_poison(**kwargs: Any) -> None:
    if any(message_id.startswith("poison-") for message_id in kwargs["message_ids"]):
        os.kill(os.getpid(), signal.SIGKILL)
