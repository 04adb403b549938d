"""Feedback: the SDK's feedback client files a report over TLS; staff read it in the admin.

A report needs a Session Token (signed in or out, no scope) and is stored as sent; an
oversize report or body, a malformed one, or one past the per-Session hourly budget is
refused with a JSON error and stores nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client as DjangoClient
from personal_agent_protocol.demo.sockets import served_over_tls
from personal_agent_protocol.feedback import FeedbackError

from poppy_django.models import FeedbackReport
from tests.authority.channels import ChannelAgent
from tests.authority.sdk_agent import ORIGIN, TENANT, World

pytestmark = pytest.mark.django_db(transaction=True)

FEEDBACK = f"{ORIGIN}/poppy/feedback"


def over_tls(world: World, scenario: Callable[[], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        async with served_over_tls(world.network):
            await world.discover()
            return await scenario()

    return asyncio.run(run())


def test_poppy_json_lists_the_feedback_endpoint(world: World) -> None:
    assert asyncio.run(world.discover()).document.feedback.endpoint == FEEDBACK


def test_the_sdk_files_a_report_with_a_signed_out_session(world: World) -> None:
    agent = ChannelAgent(world)
    user = "usr_feedback_reporter_01"

    async def scenario() -> Any:
        session = await agent.session(user)
        await agent.report(user, session, "Pay with a gift card", "No way to pay by gift card.")
        return session

    session = over_tls(world, scenario)
    report = FeedbackReport.objects.get()
    assert (report.kind, report.task) == ("missing", "Pay with a gift card")
    assert report.description == "No way to pay by gift card."
    assert report.client_id == world.atlas.client_id and report.user_id == user
    assert report.session_id == session.session_id and report.signed_in is False


def _send(world: World, agent: ChannelAgent, user: str, bodies: list[bytes]) -> list[Any]:
    async def scenario() -> list[Any]:
        session = await agent.session(user)
        answers = []
        for body in bodies:
            answers.append(
                await agent.transport.request(
                    "POST",
                    FEEDBACK,
                    token=session,
                    tenant_id=TENANT,
                    pairwise_user_id=user,
                    issuer=ORIGIN,
                    headers={"Content-Type": "application/json"},
                    content=body,
                )
            )
        return answers

    return over_tls(world, scenario)


def test_oversize_and_malformed_reports_are_refused_and_store_nothing(world: World) -> None:
    agent = ChannelAgent(world)
    good = {"kind": "missing", "task": "Gift cards", "description": "Not offered."}
    cases = {
        "task over 200": (json.dumps({**good, "task": "x" * 201}), 400, "invalid_request"),
        "description over 2000": (
            json.dumps({**good, "description": "x" * 2001}),
            400,
            "invalid_request",
        ),
        "no task": (json.dumps({"kind": "missing", "description": "d"}), 400, "invalid_request"),
        "task not text": (json.dumps({**good, "task": 7}), 400, "invalid_request"),
        "not JSON": ("task=x", 400, "invalid_request"),
        "an array": ("[]", 400, "invalid_request"),
        "a NUL character": (json.dumps({**good, "task": "a\x00b"}), 400, "invalid_request"),
        "a lone surrogate": (
            json.dumps({**good, "description": "\ud800"}),
            400,
            "invalid_request",
        ),
        "body over 16 KiB": (json.dumps({**good, "pad": "x" * 17_000}), 413, "request_too_large"),
    }
    answers = _send(
        world, agent, "usr_feedback_hostile_01", [c[0].encode() for c in cases.values()]
    )
    for (what, (_, status, error)), answer in zip(cases.items(), answers, strict=True):
        assert answer.status_code == status, (what, answer.status_code, answer.text)
        assert answer.json()["error"] == error, what
    assert FeedbackReport.objects.count() == 0


def test_an_unknown_kind_is_kept_as_sent(world: World) -> None:
    agent = ChannelAgent(world)
    body = {"kind": "later-kind", "task": "Returns", "description": "Start a return."}
    (answer,) = _send(world, agent, "usr_feedback_kinds_0001", [json.dumps(body).encode()])
    assert answer.status_code == 202 and answer.content == b""
    assert FeedbackReport.objects.get().kind == "later-kind"


def test_reports_past_the_sessions_hourly_budget_are_refused(world: World) -> None:
    agent = ChannelAgent(world)
    user = "usr_feedback_chatty_0001"

    async def scenario() -> FeedbackError:
        session = await agent.session(user)
        for n in range(10):
            await agent.report(user, session, f"Task {n}", "Not offered.")
        with pytest.raises(FeedbackError) as refused:
            await agent.report(user, session, "Task 10", "Not offered.")
        return refused.value

    refused = over_tls(world, scenario)
    assert refused.code == "rate_limited" and refused.status_code == 429
    assert 0 < int(refused.details["retry_after"]) <= 3600
    assert FeedbackReport.objects.count() == 10


def test_a_report_needs_a_session_token(world: World) -> None:
    async def scenario() -> Any:
        await world.discover()
        return await world.http.post(
            FEEDBACK, json={"kind": "missing", "task": "t", "description": "d"}
        )

    answer = asyncio.run(scenario())
    assert answer.status_code == 401 and answer.json()["error"] == "invalid_token"
    assert FeedbackReport.objects.count() == 0


def test_staff_read_reports_in_the_admin_and_cannot_change_them(acme_settings: Any) -> None:
    report = FeedbackReport.objects.create(
        kind="missing",
        task="Gift cards",
        description="Not offered.",
        client_id="https://a/",
        user_id="u",
    )
    staff = User.objects.create_user("sam", password="pw", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_feedbackreport"))
    browser = DjangoClient()
    browser.force_login(staff)
    listing = browser.get(
        "/admin/poppy_django/feedbackreport/", HTTP_HOST="acme.example", secure=True
    )
    assert listing.status_code == 200 and "Gift cards" in listing.content.decode()
    change = f"/admin/poppy_django/feedbackreport/{report.pk}/delete/"
    assert browser.post(change, HTTP_HOST="acme.example", secure=True).status_code == 403
    assert FeedbackReport.objects.count() == 1
    anonymous = DjangoClient().get(
        "/admin/poppy_django/feedbackreport/", HTTP_HOST="acme.example", secure=True
    )
    assert anonymous.status_code == 302
