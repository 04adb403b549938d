"""The public path of DRF permission classes for Poppy callers.

The code lives in :mod:`poppy_django.api.permissions`; this module is the stable name to import or
to put in settings (docs/layout.md).
"""

from poppy_django.api.permissions import (
    HasPoppyScope,
    IsPoppyCaller,
    IsPoppySignedIn,
    PoppyPermissionDenied,
    principal_of,
)

__all__ = [
    "HasPoppyScope",
    "IsPoppyCaller",
    "IsPoppySignedIn",
    "PoppyPermissionDenied",
    "principal_of",
]
