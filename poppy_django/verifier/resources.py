"""The resources besides the conversation endpoint that accept this company's Session Tokens.

A part that serves one (the MCP server) registers it from ``AppConfig.ready()``; the issuer
app reads it here to issue a token for that ``resource`` (RFC 8707) with the type the part
chooses, never importing the part.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpRequest

from poppy_django.registries import Registry


@dataclass(frozen=True)
class Resource:
    """One resource server of this company, as its part describes it (read at each call)."""

    #: Its URLs while it is on (none while off), given the request that asks (or None).
    urls: Callable[[HttpRequest | None], list[str]]
    #: True: its tokens are DPoP-bound and issued only with a proof; False: Bearer tokens
    #: bound to its URL (Poppy §4.3: the company chooses the type by the server).
    dpop: Callable[[], bool]


#: The resources, by name (``mcp``), registered from ``AppConfig.ready()``.
resources: Registry[Resource] = Registry("resources")


def serving(url: str, request: HttpRequest | None) -> Resource | None:
    """The registered resource at ``url`` while it is on, or None."""
    for resource in resources:
        if url in resource.urls(request):
            return resource
    return None
