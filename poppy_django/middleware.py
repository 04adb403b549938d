"""The public path of the endpoint's middleware (``MIDDLEWARE``).

The code lives in :mod:`poppy_django.api.middleware`; this module is the stable name to import or
to put in settings (docs/layout.md).
"""

from poppy_django.api.middleware import (
    PoppyEndpointMiddleware,
)

__all__ = [
    "PoppyEndpointMiddleware",
]
