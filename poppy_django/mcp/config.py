"""The MCP server's settings, ``POPPY["MCP"]``, and the addresses they give it: where it is
mounted, the URL that is also its token ``resource``, its ``poppy.json`` entry and where its
RFC 9728 metadata is. Each is read when asked, so ``override_settings`` turns it on or off.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from poppy_django import addresses
from poppy_django.addresses import public_origin
from poppy_django.conf import poppy_settings, sub_settings

KEYS = frozenset({"ENABLED", "PATH", "AGENT", "DPOP", "CALLS_PER_MINUTE"})
#: Calls one personal agent's User may make per minute by default.
CALLS_PER_MINUTE = 120


def options() -> dict[str, Any]:
    return sub_settings("MCP", KEYS)


def enabled() -> bool:
    return bool(options().get("ENABLED", False))


def supports_dpop() -> bool:
    """``DPOP`` (True): a DPoP server — its tokens are DPoP-bound and issued only with a
    proof; False: a Bearer server — its tokens are Bearer, bound to its URL (Poppy §4.3:
    the company chooses the token type by the MCP server)."""
    return bool(options().get("DPOP", True))


def path() -> str:
    return str(options().get("PATH", "poppy/mcp")).strip("/")


def agent_name() -> str:
    return str(options().get("AGENT") or poppy_settings.AGENT)


def calls_per_minute() -> int:
    return int(options().get("CALLS_PER_MINUTE", CALLS_PER_MINUTE))


def resource_url(request: HttpRequest | None = None) -> str:
    """This MCP server's URL: its ``resource`` and the ``url`` listed in ``poppy.json``."""
    origin = public_origin(request) if request is not None else addresses.configured_origin()
    return f"{origin}/{path()}"


def resources(request: HttpRequest | None) -> list[str]:
    """The resources a Session Token may be issued for besides the endpoint: this server."""
    return [resource_url(request)] if enabled() else []


def discovery_entry(request: HttpRequest | None) -> dict[str, str]:
    """``poppy.json``'s ``apis`` entry: the server's URL is also its token ``resource``."""
    url = resource_url(request)
    return {
        "type": "mcp",
        "url": url,
        "resource": url,
        "description": "The Company Agent's tools over MCP (Streamable HTTP).",
    }


def metadata_url(request: HttpRequest) -> str:
    return f"{public_origin(request)}/.well-known/oauth-protected-resource/{path()}"
