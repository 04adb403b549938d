"""DRF's extension points on the endpoint: authentication, permission and throttle classes
from POPPY, and a subclassed view, each over HTTP with the wire's answers kept."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission
from rest_framework.throttling import BaseThrottle

from poppy_django.api.rest_framework import EndpointAuthentication
from poppy_django.api.views import MessagesView
from tests.agents import ENDPOINT, PersonalAgent
from tests.wire.wire_support import assert_error, poppy, quiet_start, rows

pytestmark = pytest.mark.django_db

BLOCKED = "https://blocked.example/pa"
seen: list[str] = []


class NotBlocked(BasePermission):
    def has_permission(self, request: Any, view: Any) -> bool:
        if request.auth.client_id == BLOCKED:
            raise PermissionDenied("This personal agent is blocked.", code="client_blocked")
        return True


class NoMorePosts(BaseThrottle):
    """Refuses every POST, asking the client to come back in 7 seconds."""

    def allow_request(self, request: Any, view: Any) -> bool:
        return request.method != "POST"

    def wait(self) -> float:
        return 6.2


class RecordingAuthentication(EndpointAuthentication):
    def authenticate(self, request: Any) -> Any:
        user, principal = super().authenticate(request)
        seen.append(principal.client_id)
        return user, principal


class CountedMessagesView(MessagesView):
    def post(self, request: Any, conversation_id: str) -> Any:
        response = super().post(request, conversation_id)
        response["X-Acme-Counted"] = "1"
        return response


HERE = "tests.wire.test_extension_points"


def test_a_permission_class_can_block_a_personal_agent(agent):
    with poppy(
        PERMISSION_CLASSES=["poppy_django.api.permissions.IsPoppyCaller", f"{HERE}.NotBlocked"]
    ):
        quiet_start(agent)
        blocked = PersonalAgent(BLOCKED)
        before = rows()
        response = blocked.start("hi")
        body = assert_error(response, 403, "client_blocked")
        assert body["error_description"] == "This personal agent is blocked."
        assert rows() == before
        # Authentication still comes first.
        assert_error(Client().post(ENDPOINT, b"{}", "application/json"), 401, "invalid_token")


def test_a_throttle_class_answers_429_with_its_wait(agent):
    conversation_id = quiet_start(agent)
    with poppy(THROTTLE_CLASSES=[f"{HERE}.NoMorePosts"]):
        before = rows()
        response = agent.send(conversation_id, "hi")
        assert_error(response, 429, "too_many_requests")
        assert response["Retry-After"] == "7"
        assert rows() == before
        assert agent.read(conversation_id).status_code == 200


def test_an_authentication_class_wraps_the_verifier_seam(agent):
    seen.clear()
    with poppy(AUTHENTICATION_CLASSES=[f"{HERE}.RecordingAuthentication"]):
        quiet_start(agent)
        assert seen == [agent.client_id]
        # The verifier (POPPY AUTHENTICATE) still decides: no credentials, no caller.
        assert_error(Client().post(ENDPOINT, b"{}", "application/json"), 401, "invalid_token")


@pytest.mark.urls("tests.wire.ext_urls")
def test_a_subclassed_view_adds_behaviour_and_keeps_the_wire(agent):
    conversation_id = quiet_start(agent)
    response = agent.send(conversation_id, None, context={"a": 1})
    assert response.status_code == 202
    assert response["X-Acme-Counted"] == "1"
    # Its refusals are still the wire's, in the wire's order (the path id before the body).
    assert_error(agent.post("/cnv_nope/messages", raw=b"{bad"), 404, "conversation_not_found")
    # The other routes are the app's.
    assert agent.read(conversation_id).status_code == 200
    assert "X-Acme-Counted" not in agent.read(conversation_id)
