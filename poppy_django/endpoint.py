"""The public path of the DRF base view of the conversation endpoint.

The code lives in :mod:`poppy_django.api.endpoint`; this module is the stable name to import or
to put in settings (docs/layout.md).
"""

from poppy_django.api.endpoint import (
    EndpointView,
    PoppyDefault,
    WaitingResponse,
    WireJSONParser,
    WireJSONRenderer,
    WireNegotiation,
)

__all__ = [
    "EndpointView",
    "PoppyDefault",
    "WaitingResponse",
    "WireJSONParser",
    "WireJSONRenderer",
    "WireNegotiation",
]
