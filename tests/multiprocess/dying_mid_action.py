"""A Celery app whose worker dies (SIGKILL) in the middle of an action: inside the tool, as it
saves the order, before anything commits. ``celery -A tests.multiprocess.dying_mid_action worker``.
"""

import os
import signal
from typing import Any

from django.db.models.signals import pre_save
from django.dispatch import receiver

from example_project.celery import app

__all__ = ["app"]


@receiver(pre_save, sender="shop.Order")
def die_while_saving(**kwargs: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)
