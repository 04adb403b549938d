"""Unknown clients cost nothing lasting, and one client has one spelling (issue 25: 4, 10)."""

from __future__ import annotations

from typing import Any

import pytest

from poppy_django.authority.models import Client, Session
from tests.agents import CLIENT_ASSERTION, JWT_BEARER, PersonalAgent
from tests.authority import network
from tests.authority.test_pages import authorize_query, browser, get, post

pytestmark = pytest.mark.django_db


@pytest.fixture
def hand(acme_settings: Any, customers: None) -> PersonalAgent:
    return PersonalAgent.with_identity()


def as_client(hand: PersonalAgent, client_id: str, **form: str) -> dict[str, str]:
    """A token request of ``hand``'s key speaking for ``client_id`` (it signs as that id)."""
    claims = hand.claims(client_id, iss=client_id)
    return {
        "grant_type": JWT_BEARER,
        "assertion": hand.signed(hand.claims("usr_spray_00000001", iss=client_id)),
        "client_id": client_id,
        "client_assertion_type": CLIENT_ASSERTION,
        "client_assertion": hand.signed(claims),
        **form,
    }


def test_unauthenticated_requests_with_new_client_ids_store_nothing_and_fetch_boundedly(
    hand: PersonalAgent, acme_settings: Any
) -> None:
    """60 requests naming 60 client ids of one host (its site answers 404): no row, and at
    most FETCHES_PER_HOST_PER_MINUTE fetches; the same id again is not fetched again."""
    acme_settings.POPPY_AUTHORITY = {
        **acme_settings.POPPY_AUTHORITY,
        "FETCHES_PER_HOST_PER_MINUTE": 5,
    }
    network.SITES["spray.example"] = {}
    for n in range(60):
        client_id = f"https://spray.example/agent-{n}.json"
        answer = hand.post_form("/oauth/token", as_client(hand, client_id), dpop=hand.proof())
        assert answer.status_code == 401 and answer.json()["error"] == "invalid_client"
    assert Client.objects.count() == 0
    assert len(network.fetched) == 5
    for path in ("/oauth/device_authorization", "/oauth/revoke"):
        form = {"scope": "poppy:read", "token": "x", **as_client(hand, "https://spray.example/a")}
        assert hand.post_form(path, form).status_code == 401
    assert Client.objects.count() == 0 and len(network.fetched) == 5


def test_a_failed_client_is_remembered_and_not_fetched_again(hand: PersonalAgent) -> None:
    network.SITES["gone.example"] = {}
    for _ in range(10):
        form = as_client(hand, "https://gone.example/agent.json")
        assert hand.post_form("/oauth/token", form, dpop=hand.proof()).status_code == 401
    assert network.fetched == ["https://gone.example/agent.json"]
    assert Client.objects.count() == 0


def test_a_real_clients_metadata_with_a_forged_assertion_stores_no_row(hand: PersonalAgent) -> None:
    """Someone else's valid client_id, but not its key: refused, and nothing stored."""
    intruder = PersonalAgent.with_identity("intruder.example")
    forged = {**hand.client_form(), "client_assertion": intruder.signed(intruder.claims("x"))}
    body = {"grant_type": JWT_BEARER, "assertion": hand.signed(hand.claims("usr_1")), **forged}
    for _ in range(3):
        answer = hand.post_form("/oauth/token", body, dpop=hand.proof())
        assert answer.status_code == 401
    assert Client.objects.count() == 0
    assert hand.start_session().status_code == 200  # the client itself: stored once it proves
    assert list(Client.objects.values_list("client_id", flat=True)) == [hand.client_id]


def test_the_authorization_page_stores_a_client_only_once_the_user_approves(
    hand: PersonalAgent,
) -> None:
    person = browser("acct-1")
    query = authorize_query(hand, "v" * 43)
    assert get(person, query).status_code == 200
    assert get(person, query).status_code == 200
    assert Client.objects.count() == 0
    post(person, query, {"decision": "deny"})
    assert Client.objects.count() == 0
    answer = post(person, query, {"decision": "approve", "scope": ["poppy:read"]})
    assert answer.status_code == 302 and "code=" in answer["Location"]
    assert Client.objects.count() == 1


def test_a_stored_client_over_the_fetch_bound_keeps_its_cached_metadata(
    hand: PersonalAgent, acme_settings: Any
) -> None:
    assert hand.start_session().status_code == 200
    acme_settings.POPPY_AUTHORITY = {
        **acme_settings.POPPY_AUTHORITY,
        "FETCHES_PER_HOST_PER_MINUTE": 2,
        "CLIENT_METADATA_CACHE_SECONDS": 0,
    }
    for _ in range(4):
        assert hand.start_session().status_code == 200
    assert len(network.fetched) == 2  # the first sign-in's: the bound is used up


RESPELLINGS = [
    "https://hand.example/agent.json?v=2",
    "https://hand.example/agent.json?",
    "https://hand.example/agent.json/",
    "https://hand.example/agent.json#",
    "HTTPS://hand.example/agent.json",
    "Https://hand.example/agent.json",
    "https://HAND.example/agent.json",
    "https://hand.example:443/agent.json",
    "https://hand.example./agent.json",
    "https://hand.example/./agent.json",
    "https://hand.example//agent.json",
    "https://hand.example/x/../agent.json",
    "https://hand.example/%61gent.json",
    "https://hand.example/agent%2Ejson",
    "https://@hand.example/agent.json",
    "https://hand.example/agent.json\x00",
    "https://[::1/agent.json",
    "https://[hand.example]/agent.json",
    "https://hand.example:0443/agent.json",
    "https://hand.example:/agent.json",
]


@pytest.mark.parametrize("client_id", RESPELLINGS)
def test_a_blocked_client_cannot_come_back_respelled(hand: PersonalAgent, client_id: str) -> None:
    """Staff blocked the client; its site answers for any spelling (echoing the id it was
    asked for). A respelled id is refused unfetched: one client, one spelling."""
    assert hand.start_session().status_code == 200
    Client.objects.update(status=Client.Status.BLOCKED)
    path = "/agent.json/" if client_id.endswith("/") else hand.identity.path
    network.serve_json(
        hand.identity.domain, path, {**hand.identity.metadata, "client_id": client_id}
    )
    network.fetched.clear()
    answer = hand.post_form("/oauth/token", as_client(hand, client_id), dpop=hand.proof())
    assert (answer.status_code, answer.json()["error"]) in (
        (401, "invalid_client"),
        (400, "invalid_request"),  # a NUL: no OAuth parameter holds one
    )
    assert network.fetched == []
    assert Session.objects.filter(client__status=Client.Status.ALLOWED).count() == 0


@pytest.mark.parametrize(
    "client_id",
    [
        "https://hand.example/agent.json",
        "https://hand.example:8443/agent.json",
        "https://agents.hand.example/v2/agent.json",
        "https://hand.example/a-b_c~d/agent",
    ],
)
def test_ids_in_normal_form_are_taken(hand: PersonalAgent, client_id: str) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(client_id)
    network.serve_json(
        parts.hostname or "",
        parts.path,
        {
            **hand.identity.metadata,
            "client_id": client_id,
            "jwks_uri": f"https://{parts.hostname}/jwks.json",
            "redirect_uris": [],
        },
    )
    network.serve_json(parts.hostname or "", "/jwks.json", hand.identity.jwks)
    answer = hand.post_form("/oauth/token", as_client(hand, client_id), dpop=hand.proof())
    assert answer.status_code == 200, answer.json()
