"""A Celery worker process's long-lived heap, kept out of the garbage collector's way.

With hundreds of turns in flight, a worker process allocates fast (every streamed chunk is a
few objects), so CPython's collector runs often, and each full collection walks every object
the process holds: Django, Celery, the apps and pydantic-ai are hundreds of thousands of
objects that live as long as the process. Measured on a worker with 200 LLM-shaped turns in
flight, collections took about a sixth of its CPU, the full ones a quarter of a second each
with the event loop stopped (docs/benchmarks-history.md, "The worker's garbage collector").

So when a worker process is ready (:mod:`poppy_django.tasks`), :func:`settle` imports what
its turns will need, moves everything alive then to the collector's permanent generation
(``gc.freeze``), and raises the youngest generation's threshold, so objects that a turn
drops soon after it made them are freed by reference counting before a collection looks
at them. Cyclic garbage is still collected; only the heap of the start is never walked again.
The embedded executor runs in the web process, which is the project's, and is left alone.
"""

from __future__ import annotations

import contextlib
import gc
import logging

from django.core.exceptions import ImproperlyConfigured

from poppy_django.agent.model_choice import build_model
from poppy_django.conf import poppy_settings

logger = logging.getLogger(__name__)

#: Allocations (less deallocations) between two collections of the youngest generation, at
#: least: CPython's default is 700. A project that set a higher threshold keeps its own.
YOUNG_GENERATION_THRESHOLD = 5000


def settle() -> None:
    """Import the configured models' code, then freeze the heap and space the collections."""
    for name in {poppy_settings.MODEL, *poppy_settings.MODELS.values()}:  # names or chains
        # A model that cannot be built is reported by the system checks and by its turns.
        with contextlib.suppress(ImproperlyConfigured):
            build_model(name)
    gc.collect()
    gc.freeze()
    young, *older = gc.get_threshold()
    if young < YOUNG_GENERATION_THRESHOLD:
        gc.set_threshold(YOUNG_GENERATION_THRESHOLD, *older)
    logger.debug("poppy: %d objects frozen out of garbage collection", gc.get_freeze_count())
