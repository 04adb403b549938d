"""The public path of where turns run (``POPPY["EXECUTOR"]``).

The code lives in :mod:`poppy_django.engine.executors`; this module is the stable name to import or
to put in settings (docs/layout.md).
"""

from poppy_django.engine.executors import (
    CeleryExecutor,
    ThreadExecutor,
)

__all__ = [
    "CeleryExecutor",
    "ThreadExecutor",
]
