"""The public path of DRF authentication and the exception handler for a company's own APIs.

The code lives in :mod:`poppy_django.api.rest_framework`; this module is the stable name to
import or to put in settings (docs/layout.md).
"""

from poppy_django.api.rest_framework import (
    DPoPAuthentication,
    EndpointAuthentication,
    IdempotentWrites,
    NotConfigured,
    PoppyAPIException,
    PoppyAuthenticationFailed,
    PoppyUser,
    authenticate,
    exception_handler,
    wire_error_response,
)

__all__ = [
    "DPoPAuthentication",
    "EndpointAuthentication",
    "IdempotentWrites",
    "NotConfigured",
    "PoppyAPIException",
    "PoppyAuthenticationFailed",
    "PoppyUser",
    "authenticate",
    "exception_handler",
    "wire_error_response",
]
