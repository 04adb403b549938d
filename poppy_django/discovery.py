"""The public path of discovery: the ``agent.protocols`` entry, ``poppy.json`` and the JWKS view.

The code lives in :mod:`poppy_django.api.discovery`; this module is the stable name to import or
to put in settings (docs/layout.md).
"""

from poppy_django.api.discovery import (
    jwks_view,
    poppy_document,
    poppy_json_view,
    protocol_entry,
)

__all__ = [
    "jwks_view",
    "poppy_document",
    "poppy_json_view",
    "protocol_entry",
]
