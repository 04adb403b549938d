"""What PoppyEndpointMiddleware skips on the endpoint's paths is the project's choice.

By default only sessions, authentication, CSRF and messages are skipped: security headers,
CORS, tracing and error reporting middleware run on the endpoint too. ``SKIP_MIDDLEWARE``
names what to skip; everything is observed through HTTP responses.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from asgiref.sync import SyncToAsync, async_to_sync
from django.core.exceptions import PermissionDenied
from django.core.signals import got_request_exception
from django.http import HttpRequest, HttpResponse
from django.test import AsyncClient, Client
from django.utils.deprecation import MiddlewareMixin

from poppy_django.conf import DEFAULTS
from tests.agents import ENDPOINT, PersonalAgent

PROBE = "tests.middleware.test_endpoint_middleware.Probe"

pytestmark = pytest.mark.django_db

_ids = iter(range(1, 10**6))


def start(agent: PersonalAgent | None = None, **extra: Any):
    """A first message, with request extras (``secure=True``, headers)."""
    body = {"message": {"id": f"mw-{next(_ids)}", "sender": "agent", "text": "hello"}}
    return (agent or PersonalAgent()).post("", body, **extra)


class Probe:
    """A project's own middleware (tracing, say): reports what it saw in a header."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> Any:
        if request.headers.get("X-Probe-Raise") == "boom":
            raise RuntimeError("a tracing middleware failed")
        if request.headers.get("X-Probe-Raise") == "forbidden":
            raise PermissionDenied
        # What the middleware before this one did (the view may add a user of its own).
        before = f"session={hasattr(request, 'session')} user={hasattr(request, 'user')}"
        response = self.get_response(request)
        response["X-Probe"] = f"{before} view={getattr(request, 'probe_view', '-')}"
        return response

    def process_view(self, request: HttpRequest, view: Any, args: Any, kwargs: Any) -> None:
        request.probe_view = getattr(view, "cls", view).__name__  # a DRF view: its class


@pytest.fixture
def probed(settings: Any) -> None:
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, PROBE]
    settings.SECURE_HSTS_SECONDS = 3600


def test_the_security_middleware_headers_apply_to_the_endpoint(probed: None) -> None:
    agent = PersonalAgent()
    started = start(agent, secure=True)
    refused = Client().post(ENDPOINT, data="{}", content_type="application/json", secure=True)
    missing = agent.get("/nothing/here", secure=True)
    assert (started.status_code, refused.status_code, missing.status_code) == (201, 401, 404)
    for response in (started, refused, missing):
        assert response["Strict-Transport-Security"] == "max-age=3600"
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Referrer-Policy"] == "same-origin"
        assert response["Content-Type"] == "application/json"


def test_sessions_auth_csrf_and_messages_are_skipped_the_rest_runs(probed: None) -> None:
    response = start()
    assert response.status_code == 201
    assert response["X-Probe"] == "session=False user=False view=ConversationsView"
    assert "Set-Cookie" not in response
    # Elsewhere the whole stack runs, as before.
    other = Client().get("/.well-known/poppy.json")
    assert other["X-Probe"].startswith("session=True user=True")


def test_the_same_under_asgi(probed: None) -> None:
    agent = PersonalAgent()
    client = AsyncClient()
    response = async_to_sync(client.get)(
        f"{ENDPOINT}/cnv_unknown/events",
        headers={"Authorization": agent.headers()["HTTP_AUTHORIZATION"]},
    )
    assert response.status_code == 404
    assert response.json()["error"] == "conversation_not_found"
    assert response["X-Probe"] == "session=False user=False view=EventsView"
    assert "Strict-Transport-Security" not in response  # HSTS is for https requests only
    assert response["X-Content-Type-Options"] == "nosniff"


def test_what_the_project_names_is_skipped(probed: None, settings: Any) -> None:
    settings.POPPY = {
        **settings.POPPY,
        "SKIP_MIDDLEWARE": [PROBE, "django.middleware.security.SecurityMiddleware"],
    }
    response = start(secure=True)
    assert response.status_code == 201
    assert "X-Probe" not in response
    assert "Strict-Transport-Security" not in response
    # Nothing else skipped: sessions and auth now run on the endpoint too.
    settings.POPPY = {**settings.POPPY, "SKIP_MIDDLEWARE": []}
    assert start()["X-Probe"].startswith("session=True user=True")


def test_a_middleware_failing_on_the_endpoint_is_a_json_500_and_reported(probed) -> None:
    reported: list[Any] = []

    def receiver(sender: Any, request: HttpRequest, **kwargs: Any) -> None:
        reported.append(request.path)

    got_request_exception.connect(receiver)
    try:
        agent = PersonalAgent()
        agent.client = Client(raise_request_exception=False)  # it re-raises what is reported
        response = start(agent, HTTP_X_PROBE_RAISE="boom", secure=True)
    finally:
        got_request_exception.disconnect(receiver)
    assert response.status_code == 500
    assert response.json() == {"error": "server_error"}
    assert response["Strict-Transport-Security"] == "max-age=3600"  # outer middleware ran
    assert reported == [ENDPOINT]


def test_a_middleware_refusing_on_the_endpoint_is_json(probed: None) -> None:
    response = start(HTTP_X_PROBE_RAISE="forbidden")
    assert response.status_code == 403
    assert response.json() == {"error": "forbidden"}


def test_skip_middleware_must_be_a_list_of_paths(settings: Any) -> None:
    from django.core.exceptions import ImproperlyConfigured

    settings.POPPY = {**settings.POPPY, "SKIP_MIDDLEWARE": "django.contrib.sessions"}
    with pytest.raises(ImproperlyConfigured, match="SKIP_MIDDLEWARE"):
        start()


def test_nonblocking_middleware_must_name_importable_classes(settings: Any) -> None:
    from django.core.exceptions import ImproperlyConfigured

    settings.POPPY = {**settings.POPPY, "NONBLOCKING_MIDDLEWARE": ["django.middleware.nope.Nope"]}
    with pytest.raises(ImproperlyConfigured, match="NONBLOCKING_MIDDLEWARE.*nope"):
        start()
    settings.POPPY = {**settings.POPPY, "NONBLOCKING_MIDDLEWARE": "django.middleware"}
    with pytest.raises(ImproperlyConfigured, match="NONBLOCKING_MIDDLEWARE"):
        start()


OUTER = "tests.middleware.test_endpoint_middleware.Outer"
INNER = "tests.middleware.test_endpoint_middleware.Inner"
calls: list[tuple[str, int]] = []


class Hooks(MiddlewareMixin):
    """Hook-only middleware (as Django's own): logs its hooks and the thread they ran in."""

    name = ""

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        calls.append((f"{self.name} request", threading.get_ident()))
        if request.headers.get("X-Answer") == self.name:
            return HttpResponse("answered here")
        if request.headers.get("X-Refuse") == self.name:
            raise PermissionDenied
        return None

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        calls.append((f"{self.name} response {response.status_code}", threading.get_ident()))
        if request.headers.get("X-Refuse-Late") == self.name:
            raise PermissionDenied
        response[f"X-{self.name}"] = "seen"
        return response


class Outer(Hooks):
    name = "outer"


class Inner(Hooks):
    name = "inner"


@pytest.fixture
def hooked(settings: Any) -> list[tuple[str, int]]:
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, OUTER, INNER]
    calls.clear()
    return calls


def test_hook_only_middleware_runs_in_order_sharing_its_thread_hops(hooked) -> None:
    response = start()
    assert response.status_code == 201
    assert [name for name, _ in hooked] == [
        "outer request",
        "inner request",
        "inner response 201",
        "outer response 201",
    ]
    assert hooked[0][1] == hooked[1][1] and hooked[2][1] == hooked[3][1]
    assert response["X-inner"] == response["X-outer"] == "seen"


def test_hook_only_middleware_inside_another_middleware_still_runs(settings: Any) -> None:
    """A middleware of its own (not hook-only) outside a run of hook-only ones calls them."""
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, PROBE, OUTER, INNER]
    calls.clear()
    response = start()
    assert response.status_code == 201
    assert [name for name, _ in calls] == [
        "outer request",
        "inner request",
        "inner response 201",
        "outer response 201",
    ]
    assert response["X-Probe"].startswith("session=False")


def test_a_hook_that_answers_skips_what_is_inside_it(hooked) -> None:
    response = start(HTTP_X_ANSWER="outer")
    assert (response.status_code, response.content) == (200, b"answered here")
    assert [name for name, _ in hooked] == ["outer request", "outer response 200"]
    calls.clear()
    response = start(HTTP_X_ANSWER="inner")
    assert [name for name, _ in hooked] == [
        "outer request",
        "inner request",
        "inner response 200",
        "outer response 200",
    ]


def test_a_hook_that_raises_is_answered_as_json_outside_it(hooked) -> None:
    response = start(HTTP_X_REFUSE="inner")
    assert response.status_code == 403 and response.json() == {"error": "forbidden"}
    # The failed middleware is not entered; the one around it sees the JSON answer.
    assert [name for name, _ in hooked] == ["outer request", "inner request", "outer response 403"]
    assert "X-inner" not in response and response["X-outer"] == "seen"
    calls.clear()
    response = start(HTTP_X_REFUSE_LATE="inner")
    assert response.status_code == 403 and response.json() == {"error": "forbidden"}
    assert [name for name, _ in hooked][-2:] == ["inner response 201", "outer response 403"]


def hops_of_a_read(agent: PersonalAgent, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many times a read under ASGI goes from the event loop to a thread."""
    hops: list[object] = []
    original = SyncToAsync.__call__

    async def counted(self: SyncToAsync, *args: Any, **kwargs: Any) -> Any:
        hops.append(self.func)
        return await original(self, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(SyncToAsync, "__call__", counted)
        response = async_to_sync(AsyncClient().get)(
            f"{ENDPOINT}/cnv_unknown/events",
            headers={"Authorization": agent.headers()["HTTP_AUTHORIZATION"]},
        )
    assert response.status_code == 404
    return len(hops)


def test_djangos_hook_only_middleware_takes_no_thread_hop(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Django's security, common and clickjacking middleware are named non-blocking by
    default: their hooks run on the loop, where in threads they cost a hop each way."""
    agent = PersonalAgent()
    stock = hops_of_a_read(agent, monkeypatch)
    settings.POPPY = {**settings.POPPY, "NONBLOCKING_MIDDLEWARE": []}
    assert hops_of_a_read(agent, monkeypatch) == stock + 2


def test_a_projects_hook_only_middleware_shares_two_thread_hops(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two hook-only middleware of the project's, not named non-blocking, run their hooks in
    two hops together (Django's own nesting would take four)."""
    agent = PersonalAgent()
    stock = hops_of_a_read(agent, monkeypatch)
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, OUTER, INNER]
    assert hops_of_a_read(agent, monkeypatch) == stock + 2


def test_middleware_named_non_blocking_runs_its_hooks_on_the_loop(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = PersonalAgent()
    stock = hops_of_a_read(agent, monkeypatch)
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, OUTER, INNER]
    settings.POPPY = {
        **settings.POPPY,
        "NONBLOCKING_MIDDLEWARE": [*DEFAULTS["NONBLOCKING_MIDDLEWARE"], OUTER, INNER],
    }
    calls.clear()
    loop_threads: list[int] = []

    async def read() -> Any:
        loop_threads.append(threading.get_ident())
        return await AsyncClient().get(
            f"{ENDPOINT}/cnv_unknown/events",
            headers={"Authorization": agent.headers()["HTTP_AUTHORIZATION"]},
        )

    response = async_to_sync(read)()
    assert response.status_code == 404 and response["X-outer"] == "seen"
    assert [name for name, _ in calls] == [
        "outer request",
        "inner request",
        "inner response 404",
        "outer response 404",
    ]
    assert {thread for _, thread in calls} == set(loop_threads)
    assert hops_of_a_read(agent, monkeypatch) == stock
