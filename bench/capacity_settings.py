"""The example project's settings, with the POPPY overrides that bench/capacity.py asks for.

Only used with ``bench/capacity.py --wake-fallback S``: ``WAKE_FALLBACK_SECONDS`` from the
environment (``POPPY_BENCH_WAKE_FALLBACK_SECONDS``); everything else is example_project's.
"""

import os

from example_project.settings import *  # noqa: F403
from example_project.settings import POPPY

POPPY = {
    **POPPY,
    "WAKE_FALLBACK_SECONDS": float(os.environ.get("POPPY_BENCH_WAKE_FALLBACK_SECONDS", "10")),
}
