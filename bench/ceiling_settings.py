"""The example project's settings with ``bench/ceiling.py`` as the URLconf (its URLs plus the
ceiling route), for the web processes ``bench/latency.py`` starts.
"""

from example_project.settings import *  # noqa: F403

ROOT_URLCONF = "bench.ceiling"
