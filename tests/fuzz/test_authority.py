"""Property-based fuzzing of the authorization server: its endpoints and its pages' forms.

Every case is one request through the example project's URLs and middleware (Django's test
client, which raises whatever a view raises: a 500 fails the case). The token, device
authorization and revocation endpoints get form bodies mixing valid values (a fresh client
assertion, a real Session, a DPoP proof) with hostile ones (NUL, broken IPv6 brackets,
respelled client ids, invalid UTF-8, junk); every answer is JSON, an error has ``error``,
and a refusal never stores a client. The authorization page, the device page and the
disconnect form get the same values as a logged-in User's browser would send them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

import pytest
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from hypothesis import given, settings
from hypothesis import strategies as st

from poppy_django.authority.models import Client
from tests.agents import CLIENT_ASSERTION, JWT_BEARER, PersonalAgent
from tests.authority.conftest import _sites, acme_settings, customers  # noqa: F401
from tests.authority.sdk_agent import DOMAIN
from tests.authority.test_pages import browser, device_codes
from tests.fuzz.harness import PROFILE

pytestmark = pytest.mark.django_db

DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"
VERIFIER = "v" * 50

#: Values that once answered 500 somewhere, and their neighbours.
HOSTILE = [
    "\x00",
    "ses_\x00",
    "https://hand.example/agent.json\x00",
    "https://[::1/agent.json",
    "https://[::1]]/agent.json",
    "https://[v1.x]/a",
    "https://hand.example:99999/agent.json",
    "https://hand.example:-1/a",
    "https://hand.example/agent.json?v=2",
    "https://hand.example/agent.json/",
    "HTTPS://HAND.EXAMPLE/agent.json",
    "x" * 600,
    "[" * 200,
    "%ff%fe",
    "ä",
]

junk = st.sampled_from(HOSTILE) | st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30
)


def mostly(valid: Any, tenths: int = 6) -> st.SearchStrategy[Any]:
    return st.integers(0, 9).flatmap(lambda n: st.just(valid) if n < tenths else junk)


class Target:
    """One personal agent with a Session and codes to aim at, and what each case checks."""

    def __init__(self) -> None:
        self.hand = PersonalAgent.with_identity()
        started = self.hand.start_session().json()
        self.session_id = started["session_id"]
        self.session_token = started["access_token"]
        self.codes = device_codes(self.hand)
        self.statuses: dict[int, int] = {}

    def client_fields(self, draw: st.DrawFn) -> dict[str, str]:
        fields = self.hand.client_form()
        return {
            "client_id": draw(mostly(fields["client_id"], 9)),
            "client_assertion_type": draw(mostly(CLIENT_ASSERTION, 9)),
            "client_assertion": draw(mostly(fields["client_assertion"], 9)),
        }

    def post(self, path: str, form: dict[str, str], raw: str, proof: str | None) -> Any:
        body = urlencode(form) + raw
        extra = {"HTTP_DPOP": proof} if proof is not None else {}
        return self.hand.client.post(
            path,
            data=body,
            content_type="application/x-www-form-urlencoded",
            secure=True,
            HTTP_HOST=DOMAIN,
            **extra,
        )

    def check_json(self, answer: Any, clients_before: int) -> None:
        self.statuses[answer.status_code] = self.statuses.get(answer.status_code, 0) + 1
        assert answer.status_code < 500, answer.content[:300]
        assert answer["Content-Type"] == "application/json", answer["Content-Type"]
        body = answer.json()
        if answer.status_code >= 400:
            assert isinstance(body.get("error"), str), body
            assert Client.objects.count() == clients_before, "a refusal stored a client"

    def report(self, route: str, *, answered: bool = True) -> None:
        """The answers' statuses (the long run's results), and proof the campaign got past
        client authentication: one refused at the door would test nothing behind it."""
        print(f"\n{route}: statuses {dict(sorted(self.statuses.items()))}")
        if answered:
            assert any(status < 400 for status in self.statuses), self.statuses


def raw_tails() -> st.SearchStrategy[str]:
    """Bytes a form parser must survive: invalid UTF-8, bare separators, repeated names."""
    tails = st.sampled_from(["&%ff=%fe", "&&=&", "&client_id=", "&session_id=%00", "&=%00"])
    return mostly("", 8).flatmap(lambda tail: tails if tail != "" else st.just(""))


def campaign(test: Any) -> Any:
    return settings(settings.get_profile(PROFILE))(test)


@pytest.fixture
def target(acme_settings: Any, customers: None) -> Target:  # noqa: F811
    return Target()


def test_fuzz_token_endpoint(target: Target) -> None:
    hand = target.hand
    grants = st.sampled_from(
        [JWT_BEARER, JWT_BEARER, DEVICE_CODE, "refresh_token", "authorization_code"]
    )
    grant_types = st.integers(0, 9).flatmap(lambda n: grants if n < 8 else junk)

    @campaign
    @given(data=st.data(), grant_type=grant_types, raw=raw_tails(), proof=st.integers(0, 9))
    def case(data: st.DataObject, grant_type: str, raw: str, proof: int) -> None:
        draw = data.draw
        form = {"grant_type": grant_type, **target.client_fields(draw)}
        optional = {
            "assertion": mostly(hand.signed(hand.claims("usr_hand_000000000000001")), 8),
            "session_id": mostly(target.session_id),
            "device_code": mostly(target.codes["device_code"]),
            "refresh_token": junk,
            "code": junk,
            "code_verifier": mostly(VERIFIER),
            "redirect_uri": mostly(hand.identity.metadata["redirect_uris"][0]),
            "scope": mostly("poppy:read"),
        }
        for name, values in optional.items():
            if draw(st.booleans()):
                form[name] = draw(values)
        dpop = hand.proof() if proof < 8 else (None if proof < 9 else "not.a.proof")
        before = Client.objects.count()
        target.check_json(target.post("/oauth/token", form, raw, dpop), before)

    case()
    target.report("token")


def test_fuzz_device_authorization_endpoint(target: Target) -> None:
    scopes = st.sampled_from(["poppy:read", "poppy:read poppy:write", "root"])

    @campaign
    @given(data=st.data(), scope=mostly("poppy:read", 7) | scopes, raw=raw_tails())
    def case(data: st.DataObject, scope: str, raw: str) -> None:
        form = {"scope": scope, **target.client_fields(data.draw)}
        before = Client.objects.count()
        target.check_json(target.post("/oauth/device_authorization", form, raw, None), before)

    case()
    target.report("device_authorization")


def test_fuzz_revocation_endpoint(target: Target) -> None:
    @campaign
    @given(data=st.data(), raw=raw_tails())
    def case(data: st.DataObject, raw: str) -> None:
        form = target.client_fields(data.draw)
        if data.draw(st.integers(0, 9)) < 8:
            form["token"] = data.draw(st.sampled_from(["x", target.session_token]) | junk)
        before = Client.objects.count()
        target.check_json(target.post("/oauth/revoke", form, raw, None), before)

    case()
    target.report("revoke")


def test_fuzz_authorization_page_and_its_consent_form(target: Target) -> None:
    hand = target.hand
    person = browser("acct-1")
    valid = {
        "response_type": "code",
        "client_id": hand.client_id,
        "redirect_uri": hand.identity.metadata["redirect_uris"][0],
        "scope": "poppy:read poppy:write",
        "state": "st4te",
        "code_challenge": create_s256_code_challenge(VERIFIER),
        "code_challenge_method": "S256",
    }

    @campaign
    @given(data=st.data(), method=st.sampled_from(["GET", "POST"]))
    def case(data: st.DataObject, method: str) -> None:
        params = {
            name: data.draw(mostly(value, 7))
            for name, value in valid.items()
            if data.draw(st.integers(0, 9)) < 9
        }
        path = "/oauth/authorize?" + "&".join(
            f"{quote(k)}={quote(v, safe='')}" for k, v in params.items()
        )
        if method == "GET":
            answer = person.get(path, secure=True, HTTP_HOST=DOMAIN)
        else:
            form = {
                "decision": data.draw(mostly("approve")),
                "scope": data.draw(st.lists(mostly("poppy:read"), max_size=3)),
            }
            answer = person.post(path, form, secure=True, HTTP_HOST=DOMAIN)
        target.statuses[answer.status_code] = target.statuses.get(answer.status_code, 0) + 1
        assert answer.status_code in (200, 302, 400), answer.status_code

    case()
    target.report("authorize")


def test_fuzz_device_page_and_disconnect_form(target: Target) -> None:
    person = browser("acct-1")

    @campaign
    @given(
        code=mostly(target.codes["user_code"], 3),
        decision=mostly("approve", 5),
        scopes=st.lists(mostly("poppy:read"), max_size=3),
        client_id=mostly(target.hand.client_id, 2),
        via=st.sampled_from(["GET", "POST"]),
    )
    def case(code: str, decision: str, scopes: list[str], client_id: str, via: str) -> None:
        if via == "GET":
            answer = person.get(
                "/device?" + urlencode({"user_code": code}), secure=True, HTTP_HOST=DOMAIN
            )
        else:
            form = {"user_code": code, "decision": decision, "scope": scopes}
            answer = person.post("/device", form, secure=True, HTTP_HOST=DOMAIN)
        assert answer.status_code in (200, 429), answer.status_code
        done = person.post(
            "/account/agents", {"client_id": client_id}, secure=True, HTTP_HOST=DOMAIN
        )
        assert done.status_code == 302
        target.statuses[answer.status_code] = target.statuses.get(answer.status_code, 0) + 1

    case()
    target.report("device page", answered=False)
