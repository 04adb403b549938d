"""The public path of the endpoint's DRF throttle and the bound on waiting reads.

The code lives in :mod:`poppy_django.api.throttling`; this module is the stable name to import or
to put in settings (docs/layout.md).
"""

from poppy_django.api.throttling import (
    PoppyRateThrottle,
    WaitingSlots,
)

__all__ = [
    "PoppyRateThrottle",
    "WaitingSlots",
]
