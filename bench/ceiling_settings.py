"""The example project's settings with ``bench/ceiling.py`` as the URLconf (its URLs plus the
ceiling route) and ``bench/timeline.py``'s app, for the processes ``bench/latency.py`` starts.
"""

from example_project.settings import *  # noqa: F403

ROOT_URLCONF = "bench.ceiling"
INSTALLED_APPS = [*INSTALLED_APPS, "bench.timeline.TimelineConfig"]  # noqa: F405
