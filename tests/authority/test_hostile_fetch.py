"""The client-metadata fetch against a hostile site on 127.0.0.1: dripping, bombs, nesting.

Issue 25, findings 1, 2, 3 and 8. The fetch runs before client authentication at
``/oauth/token`` (and the device, revocation and authorization endpoints), so these are what
anyone with a public https host can make the authority do.
"""

from __future__ import annotations

import json
import tracemalloc
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from poppy_django.authority.models import Client, Session
from tests.agents import PersonalAgent
from tests.authority import loopback, network

pytestmark = pytest.mark.django_db

#: A drip of this many bytes at one a second would take 10 minutes.
DRIP_BYTES = 600


@pytest.fixture
def site(acme_settings: Any) -> Iterator[loopback.Listener]:
    acme_settings.POPPY_AUTHORITY = {
        **acme_settings.POPPY_AUTHORITY,
        "FETCH_TRANSPORT": "tests.authority.loopback.transport",
        "RESOLVER": "tests.authority.loopback.resolve",
        "FETCH_TIMEOUT_SECONDS": 2,
    }
    yield from loopback.started()


@pytest.fixture
def hand(site: loopback.Listener) -> PersonalAgent:
    agent = PersonalAgent.with_identity()
    network.reset()  # served by the listener, not the in-process sites
    site.answers["/agent.json"] = loopback.json_answer(json.dumps(agent.identity.metadata).encode())
    site.answers["/jwks.json"] = loopback.json_answer(json.dumps(agent.identity.jwks).encode())
    return agent


def test_the_hand_agent_signs_in_through_the_listener(hand: PersonalAgent, site: Any) -> None:
    """The routing works: an honest site served by the listener is fetched and accepted."""
    assert hand.start_session().status_code == 200
    assert [r.split(b" ")[1] for r in site.requests] == [b"/agent.json", b"/jwks.json"]
    assert b"host: hand.example" in site.requests[0].lower()


def _metadata_answer(hand: PersonalAgent, **headers: str) -> bytes:
    return loopback.json_answer(json.dumps(hand.identity.metadata).encode(), **headers).raw


@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", ["status line", "headers", "body"])
def test_a_dripping_site_is_cut_off_at_one_deadline(
    hand: PersonalAgent, site: loopback.Listener, where: str
) -> None:
    """A site sending one byte a second, where a drip would take ten minutes, is refused
    (the test's timeout is the bound: before the deadline covered the status line and the
    headers, only the body was)."""
    pad = "x" * DRIP_BYTES
    if where == "status line":
        raw = f"HTTP/1.1 200 OK{' ' * DRIP_BYTES}\r\n".encode() + _metadata_answer(hand)[17:]
        drip_from = 4
    elif where == "headers":
        raw = _metadata_answer(hand, X_Pad=pad)
        drip_from = raw.index(b"X-Pad") + 2
    else:
        body = json.dumps({**hand.identity.metadata, "pad": pad}).encode()
        raw = loopback.json_answer(body).raw
        drip_from = raw.index(b"\r\n\r\n") + 10
    site.answers["/agent.json"] = loopback.Answer(raw, drip_from=drip_from)
    refused = hand.start_session()
    assert site.dripping.is_set()
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"
    assert Session.objects.count() == 0 and Client.objects.count() == 0


def _compressed(encoding: str, size: int) -> bytes:
    """``size`` bytes of JSON whitespace, compressed in pieces (never all in memory)."""
    wbits = {"gzip": 31, "deflate": 15}[encoding]
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    piece = b" " * (1024 * 1024)
    parts = [packer.compress(b"{")]
    parts += [packer.compress(piece) for _ in range(size // len(piece))]
    parts.append(packer.compress(b'"a": 1}') + packer.flush())
    return b"".join(parts)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_compression_bomb_is_refused_before_it_is_inflated(
    hand: PersonalAgent, site: loopback.Listener, encoding: str
) -> None:
    """64 MiB of JSON in a ~64 KB answer, under the size limit: refused, and the process
    does not grow by what it would inflate to (before: by the whole 64 MiB)."""
    bomb = _compressed(encoding, 64 * 1024 * 1024)
    assert len(bomb) < 100 * 1024
    headers = {"Content_Encoding": encoding}
    site.answers["/agent.json"] = loopback.json_answer(bomb, **headers)
    tracemalloc.start()
    try:
        refused = hand.start_session()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"
    assert peak < 16 * 1024 * 1024, f"{peak / 2**20:.0f} MiB traced while refusing the bomb"
    assert b"accept-encoding: identity" in site.requests[0].lower()


@pytest.mark.parametrize(
    "encoding", ["gzip", "deflate", "br", "zstd", "GZIP", "identity, gzip", "x-gzip"]
)
def test_any_compressed_answer_is_refused_even_a_well_formed_one(
    hand: PersonalAgent, site: loopback.Listener, encoding: str
) -> None:
    """Valid metadata sent with a Content-Encoding the authority never asked for."""
    document = json.dumps(hand.identity.metadata).encode()
    packers = {"gzip": 31, "deflate": 15}
    wbits = packers.get(encoding.lower().removeprefix("x-"))
    if wbits is not None:
        packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
        document = packer.compress(document) + packer.flush()
    site.answers["/agent.json"] = loopback.json_answer(document, Content_Encoding=encoding)
    refused = hand.start_session()
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"


def test_an_identity_encoded_answer_is_still_taken(hand: PersonalAgent, site: Any) -> None:
    site.answers["/agent.json"] = loopback.json_answer(
        json.dumps(hand.identity.metadata).encode(), Content_Encoding="identity"
    )
    assert hand.start_session().status_code == 200


def _nested(depth: int, leaf: str = "1") -> str:
    return '{"a":' * depth + leaf + "}" * depth


@pytest.mark.parametrize(
    ("path", "document"),
    [
        ("/agent.json", "[" * 50_000 + "]" * 50_000),
        ("/agent.json", _nested(40_000)),
        ("/jwks.json", "[" * 50_000 + "]" * 50_000),
    ],
    ids=["array-50000", "object-40000", "jwks-array-50000"],
)
def test_deeply_nested_json_is_a_clear_refusal(
    hand: PersonalAgent, site: loopback.Listener, path: str, document: str
) -> None:
    site.answers[path] = loopback.json_answer(document.encode())
    refused = hand.start_session()
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"
    assert Client.objects.count() == 0


@pytest.mark.parametrize(("depth", "status"), [(40, 401), (20, 200)])
def test_metadata_nested_past_the_depth_limit_is_refused(
    hand: PersonalAgent, site: Any, depth: int, status: int
) -> None:
    """Nesting Python parses (40 deep) but no metadata needs: refused before it is stored."""
    metadata = {**hand.identity.metadata, "extra": json.loads(_nested(depth))}
    site.answers["/agent.json"] = loopback.json_answer(json.dumps(metadata).encode())
    assert hand.start_session().status_code == status


# SSRF: IPv6 spellings of internal IPv4 addresses (finding 3) ------------------------------

EMBEDDING_INTERNAL = [
    # NAT64, well-known prefix (RFC 6052): 169.254.169.254, 127.0.0.1, 10/8, 192.168/16
    "64:ff9b::a9fe:a9fe",
    "64:ff9b::169.254.169.254",
    "64:ff9b::7f00:1",
    "64:ff9b::10.0.0.1",
    "64:ff9b::c0a8:101",
    "64:FF9B::A9FE:A9FE",
    "0064:ff9b:0000:0000:0000:0000:a9fe:a9fe",
    # Local-use NAT64 (RFC 8215): refused whatever it embeds
    "64:ff9b:1::a00:1",
    "64:ff9b:1::5db8:d822",
    "64:ff9b:1:ffff::1",
    # 6to4 (RFC 3056): 2002:AABB:CCDD::/48 embeds AA.BB.CC.DD
    "2002:a9fe:a9fe::1",
    "2002:7f00:1::",
    "2002:a00:1:1::1",
    "2002:c0a8:101::1",
    # IPv4-compatible (deprecated): refused whatever it embeds
    "::127.0.0.1",
    "::7f00:1",
    "::10.0.0.1",
    "::169.254.169.254",
    "::93.184.216.34",
    # IPv4-translated (SIIT, ::ffff:0:a.b.c.d)
    "::ffff:0:a9fe:a9fe",
    "::ffff:0:127.0.0.1",
    "::ffff:0:10.0.0.1",
    # IPv4-mapped
    "::ffff:127.0.0.1",
    "::ffff:7f00:1",
    "::ffff:a9fe:a9fe",
    "::ffff:10.0.0.1",
    # Site-local (deprecated), all of fec0::/10
    "fec0::1",
    "fec0:0:0:ffff::1",
    "feff:ffff::1",
    # Teredo (2001::/32)
    "2001::1",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    # A zone index changes nothing
    "fe80::1%eth0",
]


@pytest.fixture
def mock_hand(acme_settings: Any) -> PersonalAgent:
    return PersonalAgent.with_identity()


@pytest.mark.parametrize("address", EMBEDDING_INTERNAL)
def test_ipv6_spellings_of_internal_addresses_are_never_fetched(
    mock_hand: PersonalAgent, address: str
) -> None:
    network.ADDRESSES[mock_hand.identity.domain] = [address]
    refused = mock_hand.start_session()
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"
    assert network.fetched == []


@pytest.mark.parametrize(
    "address",
    [
        "93.184.216.34",
        "2606:4700::1111",
        "64:ff9b::5db8:d822",  # NAT64 of 93.184.216.34 (an IPv6-only network with DNS64)
        "64:ff9b::93.184.216.34",
        "2002:5db8:d822::1",  # 6to4 of 93.184.216.34
        "::ffff:93.184.216.34",
    ],
)
def test_public_addresses_in_any_spelling_are_fetched(
    mock_hand: PersonalAgent, address: str
) -> None:
    network.ADDRESSES[mock_hand.identity.domain] = [address]
    assert mock_hand.start_session().status_code == 200
