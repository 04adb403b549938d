"""The personal-agent client: SSE parsing, and a whole conversation against a live server
with the development authority and the DPoP verifier (what an outside client would do)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from poppy_django.authority.tokens import mint_development_token
from poppy_django.client import DPoPKey, PoppyClient, PoppyClientError, SSEFrame, iter_sse
from poppy_django.models import Event
from poppy_django.verifier import dpop
from tests.threaded_server import serve
from tests.waiting import eventually


def test_sse_parser() -> None:
    lines = [
        ": keep-alive",
        "",
        "event: text-delta",
        'data: {"message_id": "m1", "text": "Hel"}',
        "",
        "id: evt_2",
        'data: {"type":',
        'data:"state"}',
        "",
        "id: evt_3",
        "",  # no data: nothing dispatched
        "data: x",
        "unknown: field",
        "retry: 100",
        "",
        "data: trailing without blank line",
    ]
    assert list(iter_sse(lines)) == [
        SSEFrame(event="text-delta", data='{"message_id": "m1", "text": "Hel"}', id=None),
        SSEFrame(event="message", data='{"type":\n"state"}', id="evt_2"),
        SSEFrame(event="message", data="x", id=None),
    ]


def test_proof_names_the_url_without_query() -> None:
    import jwt

    key = DPoPKey()
    signed = key.proof(
        "get", "https://a.example/p/c/1/events?wait=30#x", access_token="t", nonce="n"
    )
    header = jwt.get_unverified_header(signed)
    claims = jwt.decode(signed, key.private_key.public_key(), algorithms=["ES256"])
    assert header["typ"] == "dpop+jwt" and header["jwk"] == key.public_jwk
    assert claims["htm"] == "GET" and claims["htu"] == "https://a.example/p/c/1/events"
    assert claims["nonce"] == "n" and "ath" in claims


@pytest.fixture
def asgi_server(transactional_db: None) -> Iterator[str]:
    """The example project under uvicorn in a thread (SSE needs ASGI; live_server is WSGI)."""
    from django.core.asgi import get_asgi_application

    with serve(get_asgi_application()) as url:
        yield url


@pytest.fixture
def live(settings: Any, asgi_server: str, tmp_path: Path) -> Iterator[str]:
    settings.DEBUG = True  # the development authority runs with DEBUG only
    settings.POPPY = {
        **settings.POPPY,
        "AUTHENTICATE": "poppy_django.verifier.dpop.verify",
        "BASE_URL": asgi_server,
        "ISSUER": None,
        "TOKENS": {"REQUIRE_NONCE": True},
        "DEV_AUTHORITY": {"KEY_FILE": str(tmp_path / "key.pem")},
    }
    dpop.reset()
    yield asgi_server + "/poppy/conversations"
    dpop.reset()


def settle(client: PoppyClient, conversation_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    cursor = None
    for _ in range(20):
        page = client.events(conversation_id, cursor, wait=5)
        events += page["events"]
        cursor = page["cursor"]
        states = [e for e in events if e["type"] == "state"]
        if states and states[-1]["status"] != "working":
            return events
    raise AssertionError(events)


def test_whole_conversation_over_http(live: str) -> None:
    key = DPoPKey()
    token = mint_development_token(user="u-live", jkt=key.thumbprint)
    with PoppyClient(live, token, key=key, timeout=20) as client:
        started = client.start("hello there")  # first try is refused for a nonce, retried once
        assert client.nonce is not None
        conversation_id = started["conversation_id"]
        events = settle(client, conversation_id)
        replies = [
            e["message"]["text"]
            for e in events
            if e["type"] == "message" and e["message"]["role"] == "company"
        ]
        assert replies == ["You said: hello there"]

        client.send(conversation_id, "again")
        settle(client, conversation_id)

        # The stream replays from the start, then follows; resume after an id skips the past.
        frames = list(
            itertools.islice(
                (f for f in client.stream(conversation_id, reconnect=False) if f.id), 8
            )
        )
        assert [f.json()["type"] for f in frames][:2] == ["message", "state"]
        resumed = next(
            f for f in client.stream(conversation_id, frames[2].id, reconnect=False) if f.id
        )
        assert resumed.id == frames[3].id

        assert client.close(conversation_id)["status"] == "closed"
        tail = list(client.stream(conversation_id, frames[-1].id))  # ends after "closed"
        assert tail[-1].json()["status"] == "closed"

        with pytest.raises(PoppyClientError) as caught:
            client.send(conversation_id, "after close")
        assert caught.value.error == "conversation_closed"

        client.token = mint_development_token(user="u-live", jkt=DPoPKey().thumbprint)
        with pytest.raises(PoppyClientError) as caught:
            client.events(conversation_id)
        assert (caught.value.status, caught.value.error) == (401, "invalid_dpop_proof")


def test_poppy_chat_one_message(live: str) -> None:
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("poppy_chat", "--url", live, "--message", "hello chat", stdout=out)
    text = out.getvalue()
    assert "[conversation cnv_" in text
    assert "agent> You said: hello chat" in text


def test_poppy_chat_stream_and_commands(live: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from django.core.management import call_command

    monkeypatch.setattr("sys.stdin", io.StringIO("#slow hi\n/close\n/quit\n"))
    out = io.StringIO()
    call_command("poppy_chat", "--url", live, "--stream", stdout=out)
    text = out.getvalue()
    assert "Let me check that for you." in text
    assert "[closed/agent]" in text


def test_poppy_chat_interactive_prints_replies_before_it_exits(live: str, monkeypatch) -> None:
    """Piped lines: the reader thread prints each reply; EOF waits for the last one."""
    import io

    from django.core.management import call_command

    monkeypatch.setattr("sys.stdin", io.StringIO("first line\nsecond line\n"))
    out = io.StringIO()
    # Short long-polls: the reader (a daemon thread, left in its long-poll when the command
    # returns, as when a terminal closes) ends it within a second. With the default 30 s it
    # held a waiting-read slot of this process and kept the test's server from stopping.
    call_command("poppy_chat", "--url", live, "--wait", "1", stdout=out)
    text = out.getvalue()
    conversation_id = text.split("[conversation ", 1)[1].split("]", 1)[0]
    replies = Event.objects.filter(conversation_id=conversation_id, type="message", role="company")
    # One turn per line, or one for both when the second arrived before the first turn's
    # claim: every reply is printed, the last line's included.
    assert replies.exists()
    for reply in replies:
        assert f"agent> {reply.payload['message']['text']}" in text
    assert "agent> You said: second line" in text


def test_poppy_chat_does_not_take_the_previous_turns_idle_for_the_last_reply(
    live: str, monkeypatch
) -> None:
    """The reader's page with the first turn's idle state comes back only after the second
    line was sent (a long-poll in flight while the User typed), and the next page is slow:
    EOF still waits for the second reply."""
    import io
    import threading

    from django.core.management import call_command

    second_sent = threading.Event()
    send, events = PoppyClient.send, PoppyClient.events

    def idle_in(page: dict[str, Any]) -> bool:
        return any(e.get("status") == "idle" for e in page.get("events", []))

    def second_reply_written(conversation_id: str) -> bool:
        replies = Event.objects.filter(
            conversation_id=conversation_id, type="message", role="company"
        )
        return any(r.payload["message"]["text"] == "You said: second line" for r in replies)

    def sent(self: PoppyClient, conversation_id: str, *args: Any, **kwargs: Any) -> Any:
        # The first line started the conversation: this is the second, sent once the first
        # turn has ended (its idle state is in the log).
        eventually(
            lambda: idle_in(events(self, conversation_id)), what="the first turn's idle state"
        )
        answer = send(self, conversation_id, *args, **kwargs)
        second_sent.set()
        return answer

    def late(self: PoppyClient, conversation_id: str, *args: Any, **kwargs: Any) -> Any:
        if second_sent.is_set():
            # The pages after the stale one come back only once the second reply is written:
            # by then the command has read its input to the end and waits for that reply.
            eventually(lambda: second_reply_written(conversation_id), what="the second reply")
        page = events(self, conversation_id, *args, **kwargs)
        if idle_in(page):
            second_sent.wait(timeout=10)
        return page

    monkeypatch.setattr(PoppyClient, "send", sent)
    monkeypatch.setattr(PoppyClient, "events", late)
    monkeypatch.setattr("sys.stdin", io.StringIO("first line\nsecond line\n"))
    out = io.StringIO()
    call_command("poppy_chat", "--url", live, "--wait", "1", stdout=out)  # see above: --wait
    assert "agent> You said: second line" in out.getvalue()


def test_poppy_chat_names_the_url_it_could_not_reach(settings) -> None:
    import socket

    settings.DEBUG = True  # poppy_chat mints its token with the development authority

    from django.core.management import CommandError, call_command

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/poppy/conversations"
    with pytest.raises(CommandError) as caught:
        call_command("poppy_chat", "--url", url, "--message", "hello")
    assert f"Could not reach {url}" in str(caught.value)
    assert "Is the server running" in str(caught.value)


def test_poppy_chat_says_why_no_reply_comes(live: str) -> None:
    """No worker takes the turn: it says what it waits for, then gives up with an error."""
    import io

    from django.core.management import CommandError, call_command

    from tests.turn_control import dispatch_lost

    out = io.StringIO()
    with dispatch_lost(), pytest.raises(CommandError) as caught:
        call_command(
            "poppy_chat",
            "--url",
            live,
            "--message",
            "hi",
            "--wait",
            "1",
            "--timeout",
            "2",
            stdout=out,
        )
    assert "No reply in 2 s" in str(caught.value)
    assert "[no reply after 1 s: the conversation is working." in out.getvalue()
    assert "celery -A <your project> worker" in out.getvalue()


def test_poppy_chat_says_when_a_person_is_awaited(live: str) -> None:
    """Waiting for a person is not blamed on the workers (it asked "is celery running?"):
    the hint reads the conversation's state from the read's answer."""
    import io
    import re

    from django.contrib.auth.models import Permission, User
    from django.core.management import CommandError, call_command

    from poppy_django import service
    from poppy_django.authority.development import DEFAULT_CLIENT_ID
    from poppy_django.service.conversations import request_handoff
    from poppy_django.verifier import Principal

    out = io.StringIO()
    call_command(
        "poppy_chat", "--url", live, "--user", "waiting-user", "--message", "hi", stdout=out
    )
    conversation_id = re.search(r"\[conversation (cnv_\w+)\]", out.getvalue())[1]
    sam = User.objects.create_user("sam", is_staff=True)
    sam.user_permissions.add(Permission.objects.get(codename="handle_conversations"))
    service.staff_seen("sam")  # on the desk: the handoff queues for them
    principal = Principal(client_id=DEFAULT_CLIENT_ID, user_id="waiting-user")
    assert request_handoff(principal, conversation_id).body["status"] == "queued"

    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command(
            "poppy_chat",
            *("--url", live, "--user", "waiting-user", "--conversation", conversation_id),
            *("--message", "anyone?", "--wait", "1", "--timeout", "2"),
            stdout=out,
        )
    said = out.getvalue()
    assert "[no reply after 1 s: waiting for a person (the handoff is on the" in said, said
    assert "celery" not in said
