"""The public path of the endpoint's OpenAPI document (drf-spectacular).

The code lives in :mod:`poppy_django.api.schema`; this module is the stable name to import or
to put in settings (docs/layout.md).
"""

from poppy_django.api.schema import (
    SPECTACULAR_SETTINGS,
    PoppyDPoPAPIScheme,
    PoppyDPoPScheme,
    endpoint_schema,
    postprocess,
)

__all__ = [
    "SPECTACULAR_SETTINGS",
    "PoppyDPoPAPIScheme",
    "PoppyDPoPScheme",
    "endpoint_schema",
    "postprocess",
]
