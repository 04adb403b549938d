"""Fetching a personal agent's client metadata and JWKS without being turned against us.

A ``client_id`` is a URL the caller chose, so fetching it is a server-side request forgery
risk. Every fetch here is HTTPS only, never follows a redirect, refuses hosts that resolve to
loopback, private, link-local, multicast or otherwise non-global addresses (IPv4-mapped IPv6
included), and stops at a size and a time limit. Tests route the fetch through
``POPPY_AUTHORITY["FETCH_TRANSPORT"]`` and ``["RESOLVER"]``.

Known limit: the address is checked before httpx connects and resolves again, so a DNS
answer that changes between the two (rebinding) is not caught here; run the web process
where private networks are unreachable by egress policy as well.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import httpx

from poppy_django.authority.conf import authority_settings


class FetchError(Exception):
    """A URL that is unsafe to fetch, or a response that is not a small JSON document."""


def _system_resolve(host: str) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, 443, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise FetchError("the host does not resolve") from exc
    return [str(info[4][0]) for info in infos]


def is_public_address(address: str) -> bool:
    """Whether an address is globally routable (an IPv4-mapped IPv6 one is judged as IPv4)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def check_url(url: str) -> None:
    """Refuse anything but an https URL, without credentials, whose host resolves publicly."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname or parts.username or parts.password:
        raise FetchError("only https URLs without user information are fetched")
    host = parts.hostname
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        raise FetchError("a literal IP address is not fetched")
    resolve = authority_settings().RESOLVER or _system_resolve
    addresses = list(resolve(host))
    if not addresses or not all(is_public_address(a) for a in addresses):
        raise FetchError("the host resolves to a non-public address")


def fetch_json(url: str) -> dict[str, Any]:
    """GET ``url`` safely; its JSON object, or :class:`FetchError`."""
    check_url(url)
    options = authority_settings()
    factory = options.FETCH_TRANSPORT
    limit = int(options.FETCH_MAX_BYTES)
    client = httpx.Client(
        transport=factory() if factory else None,
        timeout=float(options.FETCH_TIMEOUT_SECONDS),
        follow_redirects=False,
    )
    try:
        with client, client.stream("GET", url, headers={"Accept": "application/json"}) as response:
            if response.status_code != 200:
                raise FetchError(f"HTTP {response.status_code} (redirects are not followed)")
            content_type = response.headers.get("content-type", "").split(";", 1)[0].strip()
            if content_type != "application/json":
                raise FetchError("the response is not JSON")
            body = b""
            # httpx's timeout is per read: a server dripping bytes is stopped here.
            deadline = time.monotonic() + float(options.FETCH_TIMEOUT_SECONDS)
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > limit:
                    raise FetchError("the response is too large")
                if time.monotonic() > deadline:
                    raise FetchError("the response took too long")
    except httpx.HTTPError as exc:
        raise FetchError("the fetch failed") from exc
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise FetchError("the response is not JSON") from exc
    if not isinstance(document, dict):
        raise FetchError("the response is not a JSON object")
    return document
