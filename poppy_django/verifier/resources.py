"""The resources besides the conversation endpoint that accept this company's Session Tokens.

A part that serves one (the MCP server) registers it from ``AppConfig.ready()``; the issuer
app reads it here to issue a token for that ``resource`` (RFC 8707) with the type the part
chooses, never importing the part.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpRequest


@dataclass(frozen=True)
class Resource:
    """One resource server of this company, as its part describes it (read at each call)."""

    #: Its URLs while it is on (none while off), given the request that asks (or None).
    urls: Callable[[HttpRequest | None], list[str]]
    #: True: its tokens are DPoP-bound and issued only with a proof; False: Bearer tokens
    #: bound to its URL (Poppy §4.3: the company chooses the type by the server).
    dpop: Callable[[], bool]


_registered: dict[str, Resource] = {}


def register(name: str, resource: Resource) -> None:
    """Called from ``AppConfig.ready()`` (a later call under the same name replaces it)."""
    _registered[name] = resource


def serving(url: str, request: HttpRequest | None) -> Resource | None:
    """The registered resource at ``url`` while it is on, or None."""
    for resource in _registered.values():
        if url in resource.urls(request):
            return resource
    return None
