"""Client metadata fetched safely (the SSRF cases), cached, and the staff's say over clients."""

from __future__ import annotations

from typing import Any

import pytest

from poppy_django.authority import fetch
from poppy_django.authority.clients import client_for
from poppy_django.authority.errors import UnauthorizedClient
from poppy_django.authority.models import Client, Session
from tests.agents import PersonalAgent
from tests.authority import network

pytestmark = pytest.mark.django_db


@pytest.fixture
def hand(acme_settings: Any) -> PersonalAgent:
    return PersonalAgent.with_identity()


@pytest.mark.parametrize(
    "addresses",
    [
        ["127.0.0.1"],
        ["10.0.0.7"],
        ["192.168.1.10"],
        ["169.254.169.254"],
        ["::1"],
        ["fd00::1"],
        ["::ffff:127.0.0.1"],
        ["93.184.216.34", "10.0.0.7"],
        [],
    ],
)
def test_hosts_resolving_to_non_public_addresses_are_never_fetched(
    hand: PersonalAgent, addresses: list[str]
) -> None:
    network.ADDRESSES[hand.identity.domain] = addresses
    response = hand.start_session()
    assert response.status_code == 401 and response.json()["error"] == "invalid_client"
    assert network.fetched == []
    assert Session.objects.count() == 0


@pytest.mark.parametrize(
    "url",
    [
        "http://hand.example/agent.json",
        "https://127.0.0.1/agent.json",
        "https://[::1]/agent.json",
        "https://user:pw@hand.example/agent.json",
    ],
)
def test_only_https_urls_of_named_hosts_are_fetched(hand: PersonalAgent, url: str) -> None:
    with pytest.raises(fetch.FetchError):
        fetch.fetch_json(url)
    assert network.fetched == []


def test_a_redirect_is_not_followed(hand: PersonalAgent) -> None:
    network.serve_json(
        hand.identity.domain,
        hand.identity.path,
        {},
        status=302,
        location="http://hand.example/elsewhere.json",
    )
    assert hand.start_session().json()["error"] == "invalid_client"
    assert network.fetched == [hand.client_id]


def test_oversized_or_non_json_metadata_is_refused(hand: PersonalAgent, acme_settings: Any) -> None:
    acme_settings.POPPY_AUTHORITY = {**acme_settings.POPPY_AUTHORITY, "FETCH_MAX_BYTES": 200}
    assert hand.start_session().json()["error"] == "invalid_client"
    acme_settings.POPPY_AUTHORITY = {**acme_settings.POPPY_AUTHORITY, "FETCH_MAX_BYTES": 100_000}
    network.SITES[hand.identity.domain][hand.identity.path] = (
        200,
        {"content-type": "text/html"},
        b"<html>",
    )
    assert hand.start_session().json()["error"] == "invalid_client"


@pytest.mark.parametrize(
    "change",
    [
        {"client_id": "https://other.example/agent.json"},
        {"jwks_uri": "https://other.example/jwks.json"},
        {"jwks_uri": "http://hand.example/jwks.json"},
        {"redirect_uris": ["https://other.example/cb"]},
        {"token_endpoint_auth_method": "client_secret_basic"},
    ],
)
def test_metadata_that_does_not_fit_its_client_id_is_refused(
    hand: PersonalAgent, change: dict[str, Any]
) -> None:
    network.serve_json(
        hand.identity.domain, hand.identity.path, {**hand.identity.metadata, **change}
    )
    assert hand.start_session().json()["error"] == "invalid_client"


def test_a_jwks_with_private_key_material_is_refused(hand: PersonalAgent) -> None:
    key = {**hand.identity.jwks["keys"][0], "d": "c2VjcmV0"}
    network.serve_json(hand.identity.domain, "/jwks.json", {"keys": [key]})
    assert hand.start_session().json()["error"] == "invalid_client"


def test_metadata_is_cached_and_refetched_when_stale(
    hand: PersonalAgent, acme_settings: Any
) -> None:
    assert hand.start_session().status_code == 200
    assert hand.start_session().status_code == 200
    assert network.fetched == [hand.client_id, "https://hand.example/jwks.json"]
    acme_settings.POPPY_AUTHORITY = {
        **acme_settings.POPPY_AUTHORITY,
        "CLIENT_METADATA_CACHE_SECONDS": 0,
    }
    assert hand.start_session().status_code == 200
    assert len(network.fetched) == 4
    assert Client.objects.get().name == "Hand"


def test_a_blocked_client_starts_no_session(hand: PersonalAgent) -> None:
    assert hand.start_session().status_code == 200
    Client.objects.update(status=Client.Status.BLOCKED)
    refused = hand.start_session()
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"


def test_with_registered_clients_only_an_unknown_one_is_refused_unfetched(
    hand: PersonalAgent, acme_settings: Any
) -> None:
    acme_settings.POPPY_AUTHORITY = {**acme_settings.POPPY_AUTHORITY, "CLIENTS": "registered"}
    assert hand.start_session().json()["error"] == "invalid_client"
    assert network.fetched == [] and not Client.objects.exists()


def test_a_pre_registered_client_with_stored_keys_is_never_fetched(
    hand: PersonalAgent, acme_settings: Any
) -> None:
    acme_settings.POPPY_AUTHORITY = {**acme_settings.POPPY_AUTHORITY, "CLIENTS": "registered"}
    Client.objects.create(
        client_id=hand.client_id,
        registered=True,
        metadata=hand.identity.metadata,
        jwks=hand.identity.jwks,
    )
    network.reset()  # its website is gone: only the stored keys can serve
    assert hand.start_session().status_code == 200
    assert network.fetched == []


def test_client_for_refuses_what_is_no_client_id(acme_settings: Any) -> None:
    for value in (None, "", "x" * 600, "https://a.example/c#frag", "ftp://a.example/c"):
        with pytest.raises(UnauthorizedClient):
            client_for(value)
