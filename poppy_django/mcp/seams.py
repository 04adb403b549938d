"""How the MCP server plugs into the core: its ``poppy.json`` entry and its token resource.

:meth:`poppy_django.apps.PoppyDjangoConfig.ready` calls :func:`register`; each seam reads
``POPPY["MCP"]`` when it is asked, so the server is off wherever the setting says so.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from poppy_django.api import discovery
from poppy_django.mcp import config
from poppy_django.verifier import resources


def register() -> None:
    discovery.apis.register("mcp", _discovery_entry)
    resources.resources.register(
        "mcp", resources.Resource(urls=config.resources, dpop=config.supports_dpop)
    )


def _discovery_entry(request: HttpRequest | None) -> dict[str, Any] | None:
    """``poppy.json``'s ``apis`` entry of the server while it is on."""
    return dict(config.discovery_entry(request)) if config.enabled() else None
