"""Where the authority's outbound fetches go: routes for names reached through a gateway.

The authorization server fetches each personal agent's client metadata from its HTTPS
``client_id`` (``poppy_django.authority.fetch``: its SSRF rules unchanged). A deployment
whose egress reaches some names at fixed addresses (a gateway, a private peering — or a test
that serves the agents' sites on loopback) routes them here, through the authority's
``RESOLVER`` and ``FETCH_TRANSPORT`` hooks:

- ``POPPY_OUTBOUND_ROUTES``: JSON ``{"atlas.example": {"address": "93.184.216.34",
  "dial": "127.0.0.1:8443"}}`` — ``address`` is what the name resolves to publicly (what the
  SSRF rules judge), ``dial`` where the connection is made. TLS still names the host: its
  certificate is verified for that name.
- ``POPPY_OUTBOUND_CA_FILE``: a PEM bundle to verify those sites with instead of the
  system's (a private CA).

Names without a route resolve and connect as usual.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
from typing import Any

import httpx


def _routes() -> dict[str, dict[str, str]]:
    routes: dict[str, dict[str, str]] = json.loads(os.environ.get("POPPY_OUTBOUND_ROUTES", "{}"))
    return {host.lower(): route for host, route in routes.items()}


def resolve(host: str) -> list[str]:
    """The authority's ``RESOLVER``: a routed name's public address, else the system's answer."""
    route = _routes().get(host.lower())
    if route is not None:
        return [route["address"]]
    try:
        infos = socket.getaddrinfo(host, 443, proto=socket.IPPROTO_TCP)
    except OSError:
        return []
    return [str(info[4][0]) for info in infos]


class RoutedTransport(httpx.BaseTransport):
    """httpx's transport, dialling a routed name at its ``dial`` address.

    The request keeps its ``Host`` header, and TLS its server name (httpcore's
    ``sni_hostname`` extension), so the certificate is checked for the name, not the route.
    """

    def __init__(self, routes: dict[str, dict[str, str]], verify: ssl.SSLContext | bool) -> None:
        self.routes = routes
        self.inner = httpx.HTTPTransport(verify=verify)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        route = self.routes.get(request.url.host.lower())
        if route is None:
            return self.inner.handle_request(request)
        host, _, port = route["dial"].rpartition(":")
        routed = httpx.Request(
            request.method,
            request.url.copy_with(host=host, port=int(port)),
            headers=request.headers,
            stream=request.stream,
            extensions={**request.extensions, "sni_hostname": request.url.host},
        )
        return self.inner.handle_request(routed)

    def close(self) -> None:
        self.inner.close()


def transport() -> httpx.BaseTransport:
    """The authority's ``FETCH_TRANSPORT``: :class:`RoutedTransport` over the routes above."""
    ca_file = os.environ.get("POPPY_OUTBOUND_CA_FILE")
    verify: Any = ssl.create_default_context(cafile=ca_file) if ca_file else True
    return RoutedTransport(_routes(), verify)
