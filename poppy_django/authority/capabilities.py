"""The ``auth`` object this issuer publishes in ``poppy.json``: its sign-in methods and scopes."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from poppy_django.authority import metadata
from poppy_django.authority.conf import authority_settings
from poppy_django.authority.mediated import discovery_entry


def auth_capabilities(request: HttpRequest | None) -> dict[str, Any]:
    """The ``auth`` object of poppy.json (without ``issuer``, which discovery adds)."""
    custom = dict(authority_settings().CUSTOM_SCOPES or {})
    offered = list(metadata.scopes())
    capabilities: dict[str, Any] = {"direct": {"scopes": offered}, "device": {"scopes": offered}}
    mediated = discovery_entry(request)
    if mediated is not None:
        capabilities["mediated"] = mediated
    if custom:
        capabilities["custom_scopes"] = custom
    return capabilities
