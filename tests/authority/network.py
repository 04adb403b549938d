"""Personal agents' websites for the authority's outbound fetch, without a real network.

``POPPY_AUTHORITY["FETCH_TRANSPORT"] = "tests.authority.network.transport"`` and
``["RESOLVER"] = "tests.authority.network.resolve"``: the authority fetches client metadata
through the same code path as in production (safety checks included), from these sites.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

PUBLIC_ADDRESS = "93.184.216.34"
#: host -> path -> (status, headers, body)
SITES: dict[str, dict[str, tuple[int, dict[str, str], bytes]]] = {}
#: host -> addresses, for hosts that should resolve elsewhere (SSRF cases)
ADDRESSES: dict[str, list[str]] = {}
#: every URL fetched, in order
fetched: list[str] = []


def serve_json(host: str, path: str, document: Any, *, status: int = 200, **headers: str) -> None:
    SITES.setdefault(host, {})[path] = (
        status,
        {"content-type": "application/json", **headers},
        json.dumps(document).encode(),
    )


def serve_identity(identity: Any) -> None:
    """An SDK ``AgentIdentity``'s metadata and JWKS at its domain."""
    serve_json(identity.domain, identity.path, identity.metadata)
    serve_json(identity.domain, "/jwks.json", identity.jwks)


def reset() -> None:
    SITES.clear()
    ADDRESSES.clear()
    fetched.clear()


def resolve(host: str) -> list[str]:
    if host in ADDRESSES:
        return ADDRESSES[host]
    return [PUBLIC_ADDRESS] if host in SITES else []


def _handle(request: httpx.Request) -> httpx.Response:
    fetched.append(str(request.url))
    site = SITES.get(request.url.host, {})
    status, headers, body = site.get(request.url.path, (404, {}, b"not found"))
    return httpx.Response(status, headers=headers, content=body)


def transport() -> httpx.BaseTransport:
    return httpx.MockTransport(_handle)
