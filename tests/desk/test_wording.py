"""What staff read on the desk and in the admin: one vocabulary, who a conversation is with,
panels that follow the conversation, and the admin showing them only what they need."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone

from poppy_django import service
from poppy_django.desk import decisions
from poppy_django.engine.broker_health import health
from poppy_django.models import ActionStatus, Conversation, Status
from tests.agents import PersonalAgent
from tests.desk.conftest import DESK, act, desk_url, make_user, queued
from tests.desk.test_approvals import approval_agent, proposed, told  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)


def events_json(desk: Client, conversation_id: str) -> dict:
    response = desk.get(desk_url(conversation_id, "events.json?after=0"))
    assert response.status_code == 200, response.content
    return response.json()


def test_the_action_log_follows_an_approval(desk: Client, acct1: PersonalAgent) -> None:
    """The panel the page re-renders from the JSON shows each status the action goes through
    (it kept "awaiting approval" until a reload)."""
    conversation_id, record = proposed(acct1)
    assert 'data-status="awaiting_approval"' in events_json(desk, conversation_id)["actions_html"]
    decisions.approve(record.pk, by="sam", request_id="req-log-1")
    told(acct1, conversation_id)
    record.refresh_from_db()
    assert record.status == ActionStatus.SUCCEEDED
    log = events_json(desk, conversation_id)["actions_html"]
    assert 'data-status="succeeded"' in log and "by sam" in log
    assert "awaiting" not in log


def test_status_says_with_a_person_while_one_holds_it(desk: Client, agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    assert events_json(desk, conversation_id)["conversation"]["status_label"] == (
        "waiting for a person"
    )
    joined = act(desk, conversation_id, "join").json()["conversation"]
    assert (joined["status"], joined["status_label"]) == ("idle", "with a person")
    page = desk.get(desk_url(conversation_id)).content.decode()
    assert '<dd data-field="status_label"' in page and ">with a person</dd>" in page
    act(desk, conversation_id, "leave")
    assert events_json(desk, conversation_id)["conversation"]["status_label"] == "agent idle"


def test_waiting_since_is_formatted_like_started(desk: Client, agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    conversation = Conversation.objects.get(pk=conversation_id)
    state = events_json(desk, conversation_id)["conversation"]
    display = state["handoff_requested_display"]
    # The admin's DATETIME_FORMAT, as the template renders "Started"; no raw ISO text.
    assert display and "T" not in display and "+00:00" not in display
    page = desk.get(desk_url(conversation_id)).content.decode()
    assert f"{display} (<time data-since=" in page
    from django.utils import formats

    started = formats.date_format(timezone.localtime(conversation.created_at), "DATETIME_FORMAT")
    assert f"<dd>{started} (<time data-since=" in page


def test_rows_name_who_and_the_last_words(desk: Client) -> None:
    signed_in = PersonalAgent(account_id="acct-2")
    signed_in.settled(
        signed_in.start(
            "My tent arrived with a broken pole and I need a new one before Friday"
        ).json()["conversation_id"]
    )
    signed_out = PersonalAgent(user_id="pairwise-user-0123456789abcdef")
    signed_out.settled(signed_out.start("just browsing").json()["conversation_id"])
    rows = desk.get(DESK + "?partial=rows").content.decode()
    assert "account acct-2" in rows
    assert "user pairwise-use…" in rows
    # What the customer last said (not the Company Agent's echo of it), cut at a word.
    assert "“My tent arrived with a broken pole and I need a new one…”" in rows
    assert "“just browsing”" in rows
    assert "You said:" not in rows


def test_request_ids_stay_out_of_the_transcript(desk: Client, agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    act(desk, conversation_id, "join", request_id="req-hidden-123456")
    page = desk.get(desk_url(conversation_id)).content.decode()
    transcript = page.split("data-transcript>")[1].split("</ol>")[0]
    assert 'data-request-id="req-hidden-123456"' in transcript  # for correlation only
    assert "req-hidden" not in transcript.replace('data-request-id="req-hidden-123456"', "")
    events = events_json(desk, conversation_id)["events"]
    assert all("poppy-rid" not in event["html"] for event in events)


def test_a_turn_no_worker_took_up_is_shown(desk: Client, agent: PersonalAgent) -> None:
    conversation_id = agent.start("hello").json()["conversation_id"]
    agent.settled(conversation_id)
    # As a dispatch lost with no worker running: working, unclaimed, for over a lease.
    Conversation.objects.filter(pk=conversation_id).update(status=Status.WORKING)
    Conversation.objects.filter(pk=conversation_id).update(
        updated_at=timezone.now() - timedelta(minutes=5), lease_owner=None
    )
    assert events_json(desk, conversation_id)["conversation"]["stalled"] is True
    # Staff read what it means for them; the command to run is for a developer.
    page = desk.get(DESK).content.decode()
    assert 'data-health="no-worker"' in page
    assert "tell your administrator" in page and "celery" not in page.lower()
    assert "celery" not in events_json(desk, conversation_id)["health_html"].lower()
    rows = desk.get(DESK + "?partial=rows").content.decode()
    assert "poppy-stalled" in rows and ">not answering</span>" in rows
    developer = Client()
    developer.force_login(User.objects.create_superuser("root-stalled", password=None))
    page = developer.get(DESK).content.decode()
    assert "is a Celery worker running" in page and "celery -A yourproject worker" in page


def test_a_failing_broker_is_shown_on_the_desk(desk: Client, settings) -> None:
    settings.CELERY_BROKER_URL = "redis://:hunter2@broker.invalid:6379/0"
    settings.POPPY = {**settings.POPPY, "EXECUTOR": "poppy_django.engine.executors.CeleryExecutor"}
    developer = Client()
    developer.force_login(User.objects.create_superuser("root-broker", password=None))
    health.failed("cnv_test", ConnectionRefusedError(111, "Connection refused"))
    try:
        page = desk.get(DESK).content.decode()
        technical = developer.get(DESK).content.decode()
    finally:
        health.succeeded()
    assert 'data-health="broker"' in page and "tell your administrator" in page
    assert "broker.invalid" not in page and "sweep" not in page
    assert 'data-health="broker"' in technical
    assert "redis://broker.invalid:6379/0" in technical and "hunter2" not in technical
    assert "recovery sweep" in technical


# The admin ------------------------------------------------------------------------------

INTERNAL = ["event", "messagereceipt", "agentthread", "agentthreadentry", "actionrecord"]


def test_staff_who_handle_conversations_see_only_conversations_and_the_desk() -> None:
    staff = make_user()
    for codename in ("view_event", "view_actionrecord"):  # even holding the model permissions
        staff.user_permissions.add(
            Permission.objects.get(content_type__app_label="poppy_django", codename=codename)
        )
    client = Client()
    client.force_login(User.objects.get(pk=staff.pk))
    index = client.get("/admin/").content.decode()
    assert "/admin/poppy_django/conversation/" in index
    assert "/admin/poppy_django/supportdesk/" in index and "Support desk" in index
    for model in INTERNAL:
        assert f"/admin/poppy_django/{model}/" not in index
        assert client.get(f"/admin/poppy_django/{model}/").status_code == 403
    opened = client.get("/admin/poppy_django/supportdesk/")
    assert opened.status_code == 302 and opened["Location"] == DESK


def test_superusers_see_the_internals_with_their_plural_right() -> None:
    admin = User.objects.create_superuser("root", password=None)
    client = Client()
    client.force_login(admin)
    index = client.get("/admin/").content.decode()
    for model in INTERNAL:
        assert f"/admin/poppy_django/{model}/" in index
    assert "Agent thread entries" in index and "entrys" not in index


def test_the_conversation_list_speaks_the_desks_words(agent: PersonalAgent) -> None:
    conversation_id = queued(agent)
    client = Client()
    client.force_login(make_user())
    listing = client.get("/admin/poppy_django/conversation/").content.decode()
    assert "waiting for a person" in listing and "Queued" not in listing
    assert '<nav class="toplinks"' in listing  # the date hierarchy's drill-down (6.1 adds aria)
    for column in ("column-created_at", "column-handoff_requested_at", "column-updated_at"):
        assert column in listing
    filtered = client.get("/admin/poppy_django/conversation/?desk=waiting").content.decode()
    assert conversation_id in filtered
    service.human_joined(conversation_id, by="sam")
    filtered = client.get("/admin/poppy_django/conversation/?desk=waiting").content.decode()
    assert conversation_id not in filtered


def test_the_clients_form_says_how_to_pre_register() -> None:
    client = Client()
    client.force_login(User.objects.create_superuser("root2", password=None))
    form = client.get("/admin/poppy_authority/client/add/").content.decode()
    assert "exactly as its assertions name it" in form
    assert "Pre-registered by staff" in form and "metadata is never fetched" in form
    assert "poppy_chat --print-jwks" in form


#: The protocol's words, which staff should never have to translate.
JARGON = re.compile(
    r"\b(the User|a User|Request the User|Personal agent|personal agent|Direct Conversation"
    r"|pairwise|responder|on the wire)\b"
)


def visible_text(html: str) -> str:
    """What a person reads of a page: no tags, scripts, styles or attributes."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return re.sub(r"<[^>]+>", " ", html)


def test_the_desk_speaks_staffs_words_not_the_protocols(desk: Client) -> None:
    """The conversation's page and the queue, for staff: the customer, their agent, asking
    for them in person; none of the wire's vocabulary."""
    customer = PersonalAgent(account_id="acct-3")
    conversation_id = queued(customer, "Can someone call me?")
    customer.send(conversation_id, None, context={"locale": "fr"})
    service.human_joined(conversation_id, by="sam")
    service.request_user(conversation_id, "to confirm the address", by="sam")
    page = desk.get(desk_url(conversation_id)).content.decode()
    text = visible_text(page)
    assert JARGON.findall(text) == [], JARGON.findall(text)
    assert "<dt>Agent</dt>" not in page and "<dt>User</dt>" not in page
    for words in (
        "Customer's agent",
        "Signed in as",
        "Ask for the customer in person",
        "Ask for the customer",
        "Asked for the customer in person: to confirm the address",
    ):
        assert words in text, words
    transcript = page.split("data-transcript>")[1].split("</ol>")[0]
    assert '<span class="poppy-who">Customer</span>' in transcript
    assert '<span class="poppy-who">Customer&#x27;s agent</span>' in transcript
    queue_text = visible_text(desk.get(DESK).content.decode())
    assert JARGON.findall(queue_text) == [] and "Customer's agent" in queue_text
