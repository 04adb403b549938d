"""Fetching a personal agent's client metadata and JWKS without being turned against us.

A ``client_id`` is a URL the caller chose, so fetching it is a server-side request forgery
risk, and its server is the caller's too. Every fetch here is HTTPS only, never follows a
redirect, refuses hosts that resolve to loopback, private, link-local, multicast or
otherwise non-global addresses (IPv6 forms that embed an IPv4 address are judged by the
embedded one), takes no compressed answer (``Accept-Encoding: identity``; an answer with a
``Content-Encoding`` is refused unread), stops at a size limit, refuses JSON nested deeper
than :data:`MAX_DEPTH`, and has one deadline for everything from resolving the host to the
last body byte (a server dripping its status line or headers one byte at a time is cut off
too: httpx's own timeouts are per read). Tests route the fetch through
``POPPY_AUTHORITY["FETCH_TRANSPORT"]`` and ``["RESOLVER"]``.

Known limit: the address is checked before httpx connects and resolves again, so a DNS
answer that changes between the two (rebinding) is not caught here; run the web process
where private networks are unreachable by egress policy as well.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from poppy_django.authority.conf import authority_settings

#: The deepest nesting of arrays and objects a fetched document may have.
MAX_DEPTH = 32

#: IPv6 ranges whose low 32 bits are an IPv4 address the packet ends up at: judged by it.
_EMBEDDING_LOW_32 = (
    ipaddress.IPv6Network("64:ff9b::/96"),  # NAT64, well-known prefix (RFC 6052)
    ipaddress.IPv6Network("::ffff:0:0:0/96"),  # IPv4-translated (RFC 2765 SIIT)
)
#: IPv6 ranges refused outright: deprecated, local-use or tunnels to anywhere.
_REFUSED_V6 = (
    ipaddress.IPv6Network("::/96"),  # IPv4-compatible (deprecated, RFC 4291 §2.5.5.1)
    ipaddress.IPv6Network("64:ff9b:1::/48"),  # local-use NAT64 (RFC 8215)
    ipaddress.IPv6Network("fec0::/10"),  # site-local (deprecated, RFC 3879)
    ipaddress.IPv6Network("2001::/32"),  # Teredo: the client address is the sender's choice
)


class FetchError(Exception):
    """A URL that is unsafe to fetch, or a response that is not a small JSON document."""


class Resolver(Protocol):
    """``POPPY_AUTHORITY["RESOLVER"]``: a host's IP addresses, as strings (tests)."""

    def __call__(self, host: str, /) -> Iterable[str]: ...


class TransportFactory(Protocol):
    """``POPPY_AUTHORITY["FETCH_TRANSPORT"]``: the httpx transport fetches go through
    (tests)."""

    def __call__(self) -> httpx.BaseTransport: ...


def _system_resolve(host: str) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, 443, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise FetchError("the host does not resolve") from exc
    return [str(info[4][0]) for info in infos]


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (mapped, translated, NAT64, 6to4), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in network for network in _EMBEDDING_LOW_32):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_public_address(address: str) -> bool:
    """Whether an address is globally routable, an IPv6 one embedding IPv4 judged by both."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if not ip.is_global or ip.is_multicast:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.is_site_local or any(ip in network for network in _REFUSED_V6):
            return False
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return embedded.is_global and not embedded.is_multicast
    return True


def check_url(url: str) -> None:
    """Refuse anything but an https URL, without credentials, whose host resolves publicly."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as exc:  # malformed IPv6 brackets
        raise FetchError("the URL is malformed") from exc
    if parts.scheme != "https" or not host or parts.username or parts.password:
        raise FetchError("only https URLs without user information are fetched")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        raise FetchError("a literal IP address is not fetched")
    resolve: Resolver = authority_settings().RESOLVER or _system_resolve
    addresses = list(resolve(host))
    if not addresses or not all(is_public_address(a) for a in addresses):
        raise FetchError("the host resolves to a non-public address")


def _depth_within(document: Any, limit: int) -> bool:
    """Whether arrays and objects nest at most ``limit`` deep (iteratively: no recursion)."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value
        if isinstance(value, dict | list):
            if depth > limit:
                return False
            stack.extend((child, depth + 1) for child in children)
    return True


def parse_document(body: bytes) -> dict[str, Any]:
    """A fetched body as a JSON object of bounded depth; :class:`FetchError` otherwise."""
    try:
        document = json.loads(body)
    except RecursionError:
        raise FetchError("the response is nested too deeply") from None
    except ValueError as exc:
        raise FetchError("the response is not JSON") from exc
    if not isinstance(document, dict):
        raise FetchError("the response is not a JSON object")
    if not _depth_within(document, MAX_DEPTH):
        raise FetchError("the response is nested too deeply")
    return document


def _read(client: httpx.Client, url: str, limit: int) -> bytes:
    """GET ``url`` with ``client``: the body as sent, refused unless a small identity JSON."""
    headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
    with client.stream("GET", url, headers=headers) as response:
        if response.status_code != 200:
            raise FetchError(f"HTTP {response.status_code} (redirects are not followed)")
        content_type = response.headers.get("content-type", "").split(";", 1)[0].strip()
        if content_type != "application/json":
            raise FetchError("the response is not JSON")
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding != "identity":
            raise FetchError("a compressed response is not accepted")
        body = bytearray()
        # No Content-Encoding (or "identity"): httpx's decoder passes the bytes through.
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > limit:
                raise FetchError("the response is too large")
        return bytes(body)


@dataclass
class _Outcome:
    body: bytes | None = None
    error: BaseException | None = None


def _run(work: Callable[[], bytes], outcome: _Outcome, done: threading.Event) -> None:
    try:
        outcome.body = work()
    except BaseException as exc:  # handed to the waiting request, never lost
        outcome.error = exc
    finally:
        done.set()


def fetch_json(url: str) -> dict[str, Any]:
    """GET ``url`` safely within one deadline; its JSON object, or :class:`FetchError`.

    The fetch runs on a helper thread the request waits for at most
    ``FETCH_TIMEOUT_SECONDS``; past that the request is refused at once and the client is
    closed under the helper, which then ends at its next read.
    """
    options = authority_settings()
    factory: TransportFactory | None = options.FETCH_TRANSPORT
    seconds = float(options.FETCH_TIMEOUT_SECONDS)
    limit = int(options.FETCH_MAX_BYTES)
    client = httpx.Client(
        transport=factory() if factory else None, timeout=seconds, follow_redirects=False
    )

    def work() -> bytes:
        with client:
            check_url(url)
            return _read(client, url, limit)

    outcome, done = _Outcome(), threading.Event()
    helper = threading.Thread(
        target=_run, args=(work, outcome, done), name="poppy-client-fetch", daemon=True
    )
    helper.start()
    if not done.wait(seconds):
        client.close()
        raise FetchError(f"the fetch took longer than {seconds:g} s")
    if isinstance(outcome.error, FetchError):
        raise outcome.error
    if isinstance(outcome.error, httpx.HTTPError | httpx.InvalidURL | OSError | ValueError):
        raise FetchError("the fetch failed") from outcome.error
    if outcome.error is not None:
        raise outcome.error
    assert outcome.body is not None
    return parse_document(outcome.body)
