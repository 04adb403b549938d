"""The example project's settings with the engine's bounds that ``bench/inflight.py`` asks for.

``TURNS_IN_FLIGHT`` (``POPPY_BENCH_TURNS_IN_FLIGHT``) and ``EXECUTOR_THREADS``
(``POPPY_BENCH_EXECUTOR_THREADS``) from the environment: the example project keeps the
defaults (200 and 8), and N = 1,000 at once on one worker process needs a bound of 1,000.
Everything else is example_project's.
"""

import os

from example_project.settings import *  # noqa: F403
from example_project.settings import POPPY

POPPY = {
    **POPPY,
    "TURNS_IN_FLIGHT": int(os.environ.get("POPPY_BENCH_TURNS_IN_FLIGHT", "200")),
    "EXECUTOR_THREADS": int(os.environ.get("POPPY_BENCH_EXECUTOR_THREADS", "8")),
}
