"""The Sentry set-up of docs/operations.md, proved with sentry-sdk's transport interface: the
events it would send carry no User text, no token and no proof."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sentry_sdk
from django.test import Client, override_settings
from sentry_sdk.envelope import Envelope
from sentry_sdk.integrations.django import DjangoIntegration
from sentry_sdk.transport import Transport

from poppy_django.observe.sentry import before_send, before_send_transaction
from tests.agents import PersonalAgent
from tests.threaded_server import serve

pytestmark = pytest.mark.django_db(transaction=True)

USER_TEXT = "my card is 4111 1111 1111 1111"
PROOF = "eyJ0eXAiOiJkcG9wK2p3dCJ9.proof-that-must-not-leak.c2lnbmF0dXJl"


class Captured(Transport):
    """Keeps what the SDK would send (sentry-sdk's transport interface)."""

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.envelopes: list[Envelope] = []

    def capture_envelope(self, envelope: Envelope) -> None:
        self.envelopes.append(envelope)

    def sent(self) -> str:
        return "\n".join(
            envelope.serialize().decode("utf-8", "replace") for envelope in self.envelopes
        )


@pytest.fixture
def sentry() -> Iterator[Callable[..., Captured]]:
    def start(hook: Any = before_send, **options: Any) -> Captured:
        transport = Captured()
        sentry_sdk.init(
            dsn="https://public@sentry.example/1",
            transport=transport,
            integrations=[DjangoIntegration()],
            before_send=hook,
            include_local_variables=False,
            max_request_body_size="never",
            **options,
        )
        return transport

    yield start
    sentry_sdk.get_client().close()
    sentry_sdk.init()  # no DSN: off


def leaky_verifier(request: dict[str, Any]) -> Any:
    """A verifier with a bug: its exception quotes the credentials it was given."""
    credentials = request["headers"].get("authorization", "")
    raise RuntimeError(f"cannot verify {credentials} with {request['headers'].get('dpop')}")


def _failing_request() -> tuple[str, str, str]:
    """A message whose verification fails with the token and proof in the exception: its
    token, its error code and its request id."""
    agent = PersonalAgent()
    agent.client = Client(raise_request_exception=False)  # it re-raises what is reported
    token = agent.authorization().partition(" ")[2]
    with override_settings(POPPY={"AUTHENTICATE": leaky_verifier}):
        answer = agent.post("", agent.message(USER_TEXT), HTTP_DPOP=PROOF)
    assert answer.status_code == 500
    return token, answer.json()["error"], answer["X-Request-ID"]


def _events(transport: Captured) -> list[dict[str, Any]]:
    return [json.loads(line) for line in transport.sent().splitlines() if line.startswith('{"')]


def test_events_carry_no_user_text_token_or_proof(sentry: Callable[..., Captured]) -> None:
    transport = sentry()
    token, error, _ = _failing_request()

    def rejected() -> None:
        local_copy_of_what_the_user_wrote = USER_TEXT  # noqa: F841 - a frame's variable
        raise ValueError(f"Failing row contains ({USER_TEXT})")

    try:
        rejected()
    except ValueError:
        sentry_sdk.capture_exception()
    sentry_sdk.flush()

    sent = transport.sent()
    events = [json.loads(line) for line in sent.splitlines() if '"level"' in line]
    assert error == "server_error" and len(events) >= 2  # the endpoint's 500 and the capture
    # What failed is still told: the endpoint's log line, the captured exception's type.
    assert "POST /poppy/conversations failed" in sent and "ValueError" in sent
    # (The card number with its spaces: bare digits turn up in timestamps and ids.)
    for secret in (USER_TEXT, "4111 1111", token, PROOF):
        assert secret not in sent


def test_without_the_hook_the_same_events_leak(sentry: Callable[..., Captured]) -> None:
    """What before_send is for: sentry-sdk's own scrubbing lets an exception's message
    through (the app's log filter keeps it out of log events, not out of captured ones)."""
    transport = sentry(hook=None)
    try:
        raise ValueError(f"Failing row contains ({USER_TEXT})")
    except ValueError:
        sentry_sdk.capture_exception()
    sentry_sdk.flush()
    assert USER_TEXT in transport.sent()


def test_an_endpoint_500_is_an_exception_event_with_its_stack_and_request_id(
    sentry: Callable[..., Captured],
) -> None:
    """Not a message-only event from the log line: the exception itself, its frames, and
    the request id the answer and the log lines carry."""
    transport = sentry()
    token, _, request_id = _failing_request()
    sentry_sdk.flush()
    captured = [event for event in _events(transport) if event.get("exception")]
    assert len(captured) == 1, _events(transport)
    (exception,) = captured[0]["exception"]["values"]
    assert exception["type"] == "RuntimeError"
    assert exception["value"] == "RuntimeError (message withheld)"
    frames = exception["stacktrace"]["frames"]
    assert any(frame["function"] == "leaky_verifier" for frame in frames)
    assert captured[0]["tags"]["request_id"] == request_id
    for secret in (USER_TEXT, token, PROOF):
        assert secret not in transport.sent()


def _served_message() -> str:
    """A message over real HTTP to the example project's ASGI application (Sentry's Django
    integration makes its transactions there); the token it carried."""
    from example_project.asgi import application

    with serve(application) as url:
        agent = PersonalAgent().at(url)
        token = agent.authorization().partition(" ")[2]
        answer = agent.post("", agent.message("hello"), HTTP_DPOP=PROOF)
        assert answer.status_code == 201, answer.text
    sentry_sdk.flush()
    return token


def test_transactions_carry_no_token_or_proof(sentry: Callable[..., Captured]) -> None:
    """With Sentry's tracing on, a request's transaction would carry its headers."""
    transport = sentry(traces_sample_rate=1.0, before_send_transaction=before_send_transaction)
    token = _served_message()
    sent = transport.sent()
    assert '"type":"transaction"' in sent.replace(" ", "")
    for secret in (token, PROOF):
        assert secret not in sent


def test_without_before_send_transaction_the_proof_rides_in_transactions(
    sentry: Callable[..., Captured],
) -> None:
    """What the hook is for: sentry-sdk's own scrubbing keeps ``Authorization`` out, not
    the DPoP proof."""
    transport = sentry(traces_sample_rate=1.0)
    _served_message()
    assert PROOF in transport.sent()
