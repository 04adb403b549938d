"""A Celery app that dies (SIGKILL) right after an action executed, before the reply is written.

``celery -A tests.multiprocess.dying_worker worker`` — the crash the at-most-once rule is for.
"""

import os
import signal
from typing import Any

from django.dispatch import receiver

from example_project.celery import app
from poppy_django.signals import action_executed, turn_started

__all__ = ["app"]


@receiver(action_executed)
def die_after_action(**kwargs: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@receiver(turn_started)
def announce(**kwargs: Any) -> None:
    print("TURN STARTED", kwargs.get("conversation_id"), flush=True)
