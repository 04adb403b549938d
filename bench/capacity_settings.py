"""The example project's settings, with the POPPY overrides that bench/capacity.py asks for.

The bench holds every stream and long-poll as one caller, so ``MAX_WAITING_PER_CALLER`` (100
by default, a bound per personal agent) is raised to what it holds
(``POPPY_BENCH_MAX_WAITING_PER_CALLER``); with ``--wake-fallback S``, ``WAKE_FALLBACK_SECONDS``
(``POPPY_BENCH_WAKE_FALLBACK_SECONDS``). Everything else is example_project's.
"""

import os

from example_project.settings import *  # noqa: F403
from example_project.settings import POPPY

POPPY = {**POPPY, "MAX_WAITING_PER_CALLER": int(os.environ["POPPY_BENCH_MAX_WAITING_PER_CALLER"])}
if "POPPY_BENCH_WAKE_FALLBACK_SECONDS" in os.environ:
    POPPY["WAKE_FALLBACK_SECONDS"] = float(os.environ["POPPY_BENCH_WAKE_FALLBACK_SECONDS"])
