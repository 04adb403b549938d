"""DRF idioms on the endpoint's views, as DRF users expect them, over HTTP.

A subclass's ``permission_classes`` and ``throttle_classes`` are used (the ``POPPY`` lists
are only the defaults); ``EndpointAuthentication`` in a plain ``APIView`` answers its
refusals as JSON (DRF's own exception handling); the rate throttle takes
``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]`` for its scope.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.test import Client, override_settings
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from poppy_django.api.permissions import IsPoppyCaller
from poppy_django.api.rest_framework import EndpointAuthentication
from poppy_django.api.views import MessagesView
from tests.agents import PersonalAgent
from tests.wire.wire_support import assert_error, poppy, quiet_start, rows

pytestmark = pytest.mark.django_db

BLOCKED = "https://blocked.example/pa"


class NotBlocked(BasePermission):
    def has_permission(self, request: Any, view: Any) -> bool:
        if request.auth.client_id == BLOCKED:
            raise PermissionDenied("This personal agent is blocked.", code="client_blocked")
        return True


class NoMorePosts(BaseThrottle):
    def allow_request(self, request: Any, view: Any) -> bool:
        return request.method != "POST"

    def wait(self) -> float:
        return 3.0


class GuardedMessagesView(MessagesView):
    """Sets DRF's class attributes, as any DRF view would."""

    permission_classes = [IsPoppyCaller, NotBlocked]
    throttle_classes = [NoMorePosts]


class PlainView(APIView):
    """A plain DRF view (DRF's default exception handler) with the endpoint's authentication."""

    authentication_classes = [EndpointAuthentication]
    permission_classes = [IsAuthenticated]

    def get(self, request: Request) -> Response:
        return Response({"client_id": request.auth.client_id})


@pytest.mark.urls("tests.wire.drf_urls")
def test_a_subclass_gets_the_permission_and_throttle_classes_it_sets(agent):
    conversation_id = quiet_start(agent)  # starts are the app's view: POPPY's defaults
    before = rows()
    # The subclass's throttle refuses its POSTs...
    assert_error(agent.send(conversation_id, None, context={"a": 1}), 429, "too_many_requests")
    # ...after its permission class, which refuses a blocked personal agent first.
    blocked = PersonalAgent(BLOCKED)
    blocked_conversation = quiet_start(blocked)
    before = rows()
    response = blocked.send(blocked_conversation, None, context={"a": 1})
    assert assert_error(response, 403, "client_blocked")["error_description"] == (
        "This personal agent is blocked."
    )
    assert rows() == before


@pytest.mark.urls("tests.wire.drf_urls")
def test_the_poppy_lists_stay_the_default_of_views_that_set_nothing(agent):
    """A route not subclassed still takes POPPY["THROTTLE_CLASSES"]."""
    with poppy(THROTTLE_CLASSES=[f"{__name__}.NoMorePosts"]):
        assert_error(agent.start(None, context={"a": 1}), 429, "too_many_requests")


@pytest.mark.urls("tests.wire.drf_urls")
def test_endpoint_authentication_in_a_plain_api_view_answers_401_json(agent):
    response = Client().get("/plain")
    assert response.status_code == 401, response.content
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"] == "invalid_token"
    assert response["WWW-Authenticate"].startswith('DPoP error="invalid_token"')
    # A verified caller gets through: the same verifier as the endpoint.
    response = Client().get("/plain", **agent.headers())
    assert response.status_code == 200, response.content
    assert response.json() == {"client_id": agent.client_id}


@pytest.mark.urls("tests.wire.drf_urls")
def test_no_verifier_in_a_plain_api_view_is_501_json():
    with poppy(AUTHENTICATE=None):
        response = Client().get("/plain")
    assert response.status_code == 501, response.content
    assert response.json()["error"] == "not_implemented"


def test_default_throttle_rates_name_the_scope_rate(agent, throttle_clock):
    conversation_id = quiet_start(agent)
    rates = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"message": "1/hour"}}
    with override_settings(REST_FRAMEWORK=rates), poppy(THROTTLE_RATES={"message": None}):
        assert agent.send(conversation_id, None, context={"n": 1}).status_code == 202
        before = rows()
        assert_error(agent.send(conversation_id, None, context={"n": 2}), 429, "too_many_requests")
        assert rows() == before
