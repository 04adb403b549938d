"""Routes: the five routes, 404 not_found elsewhere, 405 with Allow, JSON errors, no redirects."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from tests.agents import ENDPOINT
from tests.wire.wire_support import ANSWER_KEYS, assert_error, quiet_start, rows

pytestmark = pytest.mark.django_db(transaction=True)


OTHER_PATHS = [
    "/",  # trailing slash on the endpoint itself
    "/{id}",
    "/{id}/",
    "/{id}/messages/",
    "/{id}/events/",
    "/{id}/handoff/",
    "/{id}/close/",
    "/{id}/events/extra",
    "/{id}/message",
    "/{id}/unknown",
    "/{id}/messages/x",
    "//messages",
]


@pytest.mark.parametrize("path", OTHER_PATHS)
@pytest.mark.parametrize("method", ["get", "post"])
def test_other_paths_under_the_endpoint_are_json_not_found(agent, path, method):
    conversation_id = quiet_start(agent)
    before = rows()
    full = path.format(id=conversation_id)
    response = agent.get(full) if method == "get" else agent.post(full, {"message": {}})
    assert_error(response, 404, "not_found")
    assert rows() == before


@pytest.mark.parametrize(
    ("path", "method", "allow"),
    [
        ("", "get", "POST"),
        ("", "put", "POST"),
        ("/{id}/messages", "get", "POST"),
        ("/{id}/messages", "delete", "POST"),
        ("/{id}/handoff", "get", "POST"),
        ("/{id}/close", "get", "POST"),
        ("/{id}/close", "patch", "POST"),
        ("/{id}/events", "post", "GET"),
        ("/{id}/events", "put", "GET"),
        ("/{id}/events", "delete", "GET"),
    ],
)
def test_wrong_method_on_a_known_path_is_405_with_allow(agent, path, method, allow):
    conversation_id = quiet_start(agent)
    before = rows()
    response = agent.client.generic(
        method.upper(),
        ENDPOINT + path.format(id=conversation_id),
        data=b"{}",
        content_type="application/json",
        **agent.headers(),
    )
    assert_error(response, 405, "method_not_allowed")
    assert response["Allow"] == allow
    assert rows() == before


def test_answers_and_reads_are_never_cached(agent):
    started = agent.start(None, context={"locale": "fr"})
    assert started.status_code == 201
    conversation_id = started.json()["conversation_id"]
    read = agent.read(conversation_id)
    assert read.status_code == 200
    closed = agent.post(f"/{conversation_id}/close")
    assert closed.status_code == 200
    for response in (started, read, closed):
        assert response["Content-Type"].startswith("application/json")
        assert "no-store" in response["Cache-Control"]


def test_unauthenticated_request_is_a_json_401(agent):
    conversation_id = quiet_start(agent)
    before = rows()
    anonymous = Client()
    for response in (
        anonymous.post(ENDPOINT, data=b"{}", content_type="application/json"),
        anonymous.get(f"{ENDPOINT}/{conversation_id}/events"),
        anonymous.post(f"{ENDPOINT}/{conversation_id}/close"),
    ):
        assert_error(response, 401, "invalid_token")
        assert response["WWW-Authenticate"].startswith("DPoP")
    assert rows() == before
    assert agent.read(conversation_id).json()["status"] == "idle"


@pytest.mark.parametrize("route", ["messages", "events", "handoff", "close"])
@pytest.mark.parametrize("bad_id", ["a.b", "x" * 257, "cnv_%20", "cnv_é", "cnv_unknown"])
def test_an_invalid_or_unknown_path_id_is_conversation_not_found(agent, route, bad_id):
    quiet_start(agent)
    before = rows()
    path = f"/{bad_id}/{route}"
    if route == "events":
        response = agent.get(path)
    else:
        response = agent.post(path, {"message": {"id": "m1", "sender": "agent", "text": "hi"}})
    assert_error(response, 404, "conversation_not_found")
    assert rows() == before


def test_the_path_id_is_checked_before_the_body(agent):
    before = rows()
    response = agent.post("/cnv_nope/messages", raw=b"{not json")
    assert_error(response, 404, "conversation_not_found")
    assert rows() == before


@override_settings(APPEND_SLASH=True)
def test_no_redirects_even_with_append_slash(agent):
    conversation_id = quiet_start(agent)
    for path in ("/", f"/{conversation_id}/events/", f"/{conversation_id}", "/x/y/z"):
        for response in (agent.get(path), agent.post(path, {})):
            assert not 300 <= response.status_code < 400, (path, response.status_code)
            assert_error(response, 404, "not_found")


def test_posts_need_no_csrf_token(agent):
    strict = Client(enforce_csrf_checks=True)
    response = strict.post(
        ENDPOINT,
        data=b'{"message": {"id": "csrf-1", "sender": "agent", "context": {"locale": "en"}}}',
        content_type="application/json",
        **agent.headers(),
    )
    assert response.status_code == 201, response.content
    assert set(response.json()) == ANSWER_KEYS


@pytest.mark.parametrize("accept", ["*/*", "application/json", "text/html", ""])
def test_answers_are_json_whatever_the_client_accepts(agent, accept):
    body = {"message": {"id": f"acc-{len(accept)}", "sender": "agent", "context": {"a": 1}}}
    response = agent.post("", body, HTTP_ACCEPT=accept)
    assert response.status_code == 201
    assert response["Content-Type"].startswith("application/json")
    conversation_id = response.json()["conversation_id"]
    read = agent.read(conversation_id, "?wait=0", HTTP_ACCEPT=accept)
    assert read.status_code == 200 and read["Content-Type"].startswith("application/json")
    assert_error(agent.read("cnv_nope", HTTP_ACCEPT=accept), 404, "conversation_not_found")


def test_a_host_that_is_not_served_is_a_json_error(agent):
    """A Host outside ALLOWED_HOSTS is refused as JSON (PoppyEndpointMiddleware's short path)."""
    before = rows()
    body = {"message": {"id": "host-1", "sender": "agent", "text": "hi"}}
    response = agent.post("", body, HTTP_HOST="evil.example")
    assert 400 <= response.status_code < 500
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    assert "error" in response.json()
    assert rows() == before


def test_pages_outside_the_endpoint_keep_their_own_error_pages(agent):
    response = agent.client.get("/not-the-endpoint/x", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert not response["Content-Type"].startswith("application/json")


def test_the_endpoint_skips_only_the_middleware_it_is_told_to(agent, settings):
    # XFrameOptionsMiddleware is not in SKIP_MIDDLEWARE: it marks the endpoint's answers too.
    response = agent.start("hello")
    assert response.status_code == 201
    assert response["X-Frame-Options"] == "DENY"
    settings.POPPY = {
        **settings.POPPY,
        "SKIP_MIDDLEWARE": ["django.middleware.clickjacking.XFrameOptionsMiddleware"],
    }
    agent.client = Client()  # a new handler loads the middleware with the new setting
    assert "X-Frame-Options" not in agent.start("hello")
    assert agent.client.get("/admin/login/")["X-Frame-Options"] == "DENY"
