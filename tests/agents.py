"""The suite's one personal-agent test double: a personal agent acting for one User, speaking
the conversation endpoint's wire.

Its credentials are the fake verifier's header (the default), or a development Session Token
bound to a DPoP key of its own (:meth:`PersonalAgent.with_session_token`: the production
verifier's, a fresh proof for each request). Its transport is Django's test client in this
process (``base_url=None``, the default) or real HTTP to a running server (``base_url``,
httpx): the same requests either way, so a test of the multi-process deployment reads like
one of the wire. With an identity of its own (:meth:`PersonalAgent.with_identity`: its
client metadata served on the authority tests' network) it also speaks the company's OAuth
endpoints by hand, assertions and proofs built here, malformed ones included (the SDK never
sends those). ``at(base_url)`` is the same
agent and User talking to another server (another web process of one deployment).
"""

from __future__ import annotations

import itertools
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import jwt
from django.test import Client

from poppy_django.verifier.fake import fake_authorization
from tests.waiting import eventually

if TYPE_CHECKING:  # the client extra (httpx): the no-extras run stays in-process
    from poppy_django.client import DPoPKey

ENDPOINT = "/poppy/conversations"
#: The company the authority tests run as its own issuer (tests/authority/sdk_agent.py).
COMPANY_DOMAIN = "acme.example"
COMPANY_ORIGIN = f"https://{COMPANY_DOMAIN}"
TOKEN_URL = f"{COMPANY_ORIGIN}/oauth/token"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLIENT_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
#: Long enough for the longest ``wait`` a test asks for, and a busy machine.
HTTP_TIMEOUT = 60.0
_ids = itertools.count(1)
#: This run's mark in every id: Redis outlives a run (rate-limit windows, replay marks), so
#: ids must not repeat across runs.
_RUN = secrets.token_hex(3)

Events = list[dict[str, Any]]


def unique(prefix: str) -> str:
    return f"{prefix}-{_RUN}-{next(_ids)}"


class PersonalAgent:
    """One personal agent acting for one User (``user_id``; a fresh one by default)."""

    def __init__(
        self,
        client_id: str = "https://pa.example/client",
        user_id: str | None = None,
        *,
        account_id: str | None = None,
        scopes: tuple[str, ...] = (),
        base_url: str | None = None,
        dpop_key: DPoPKey | None = None,
        token: str | None = None,
        identity: Any = None,
    ) -> None:
        self.client_id = client_id
        self.user_id = user_id or unique("user")
        self.account_id = account_id
        self.scopes = scopes
        self.base_url = base_url.rstrip("/") if base_url else None
        self.client = Client() if self.base_url is None else None
        self.dpop_key = dpop_key
        self.token = token
        #: Its ``AgentIdentity`` (client metadata and signing key), for the OAuth endpoints.
        self.identity = identity

    @classmethod
    def with_session_token(cls, base_url: str | None = None) -> PersonalAgent:
        """A fresh User's agent holding a development Session Token bound to its own DPoP key
        (``poppy_token``'s), for the production verifier."""
        from poppy_django.authority import development
        from poppy_django.authority.tokens import mint_development_token
        from poppy_django.client import DPoPKey

        key = DPoPKey()
        user_id = unique("user")
        token = mint_development_token(user=user_id, jkt=key.thumbprint)
        return cls(
            development.DEFAULT_CLIENT_ID, user_id, base_url=base_url, dpop_key=key, token=token
        )

    @classmethod
    def with_identity(cls, domain: str = "hand.example") -> PersonalAgent:
        """An agent with an identity at ``domain`` (served on the authority tests' network)
        and a DPoP key of its own, for the company's OAuth endpoints."""
        from personal_agent_protocol.demo.kit import AgentIdentity

        from tests.authority import network

        identity = AgentIdentity(domain=domain, name="Hand")
        network.serve_identity(identity)
        from poppy_django.client import DPoPKey

        return cls(identity.client_id, dpop_key=DPoPKey(), identity=identity)

    def signed_in(self, account_id: str, scopes: tuple[str, ...] = ()) -> PersonalAgent:
        """The same User, signed in to an account (a new token)."""
        return PersonalAgent(
            self.client_id,
            self.user_id,
            account_id=account_id,
            scopes=scopes,
            base_url=self.base_url,
        )

    def at(self, base_url: str) -> PersonalAgent:
        """The same agent and User, over real HTTP to the server at ``base_url``."""
        return PersonalAgent(
            self.client_id,
            self.user_id,
            account_id=self.account_id,
            scopes=self.scopes,
            base_url=base_url,
            dpop_key=self.dpop_key,
            token=self.token,
        )

    # -- credentials -------------------------------------------------------------------------

    def authorization(self) -> str:
        return fake_authorization(
            self.client_id, self.user_id, account_id=self.account_id, scopes=self.scopes
        )

    def headers(self, method: str = "GET", url: str = "") -> dict[str, str]:
        """The credentials as Django request META (the test client, ``RequestFactory``)."""
        return {
            "HTTP_" + name.upper().replace("-", "_"): value
            for name, value in self.http_headers(method, url).items()
        }

    def http_headers(self, method: str = "GET", url: str = "") -> dict[str, str]:
        """The credentials as HTTP headers for a request to ``url`` (a DPoP proof names it)."""
        if self.token is None or self.dpop_key is None:
            return {"Authorization": self.authorization()}
        proof = self.dpop_key.proof(method, url, access_token=self.token)
        return {"Authorization": f"DPoP {self.token}", "DPoP": proof}

    # -- the OAuth endpoints, by hand (an agent with an identity) ----------------------------

    def signed(self, claims: dict[str, Any], **header: Any) -> str:
        """A JWT signed with the agent's identity key (an assertion)."""
        assert self.identity is not None, "an agent with an identity: with_identity()"
        return jwt.encode(
            claims,
            self.identity.private_key,
            algorithm="ES256",
            headers={"kid": self.identity.kid, "typ": "JWT", **header},
        )

    def claims(self, subject: str, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        return {
            "iss": self.client_id,
            "sub": subject,
            "aud": COMPANY_ORIGIN,
            "iat": now,
            "exp": now + 60,
            "jti": secrets.token_urlsafe(16),
            **overrides,
        }

    def client_form(self, **overrides: Any) -> dict[str, str]:
        """Client authentication by a signed assertion (``private_key_jwt``)."""
        return {
            "client_id": self.client_id,
            "client_assertion_type": CLIENT_ASSERTION,
            "client_assertion": self.signed(self.claims(self.client_id)),
            **overrides,
        }

    def proof(self, url: str = TOKEN_URL, method: str = "POST", **claims: Any) -> str:
        """A DPoP proof of the agent's key, its claims overridable (forged ones too)."""
        assert self.dpop_key is not None
        return jwt.encode(
            {"htm": method, "htu": url, "iat": int(time.time()), "jti": secrets.token_urlsafe(16)}
            | claims,
            self.dpop_key.private_key,
            algorithm="ES256",
            headers={"typ": "dpop+jwt", "jwk": self.dpop_key.public_jwk},
        )

    def post_form(self, path: str, form: dict[str, str], *, dpop: str | None = None) -> Any:
        """A form POST to the company's ``path`` at its origin (the test client)."""
        assert self.client is not None, "the OAuth endpoints are reached in this process"
        extra = {"HTTP_DPOP": dpop} if dpop is not None else {}
        return self.client.post(
            path,
            data=urlencode(form),
            content_type="application/x-www-form-urlencoded",
            secure=True,
            HTTP_HOST=COMPANY_DOMAIN,
            **extra,
        )

    def start_session(self, user: str = "usr_hand_000000000000001", **form: str) -> Any:
        """The token endpoint's jwt-bearer grant: a Session for ``user``."""
        body = {
            "grant_type": JWT_BEARER,
            "assertion": self.signed(self.claims(user)),
            **self.client_form(),
            **form,
        }
        return self.post_form("/oauth/token", body, dpop=self.proof())

    # -- requests ----------------------------------------------------------------------------

    def _request(self, method: str, path: str, data: bytes | str | None, extra: dict[str, Any]):
        if self.client is not None:
            credentials = self.headers(method, f"http://testserver{ENDPOINT}{path}")
            if method == "GET":
                return self.client.get(ENDPOINT + path, **credentials, **extra)
            return self.client.post(
                ENDPOINT + path,
                data=data,
                content_type="application/json",
                **credentials,
                **extra,
            )
        # Django's META names (HTTP_X_REQUEST_ID) as the headers they stand for.
        headers = {
            key.removeprefix("HTTP_").replace("_", "-"): str(value) for key, value in extra.items()
        }
        if method != "GET":
            headers.setdefault("Content-Type", "application/json")
        url = f"{self.base_url}{ENDPOINT}{path}"
        import httpx  # the client extra: not in the no-extras run, which stays in-process

        return httpx.request(
            method,
            url,
            content=data,
            headers={**self.http_headers(method, url), **headers},
            timeout=HTTP_TIMEOUT,
        )

    def post(self, path: str, body: Any = None, *, raw: bytes | None = None, **extra: Any):
        """``POST {endpoint}{path}`` with ``body`` as JSON (``raw``: these bytes instead)."""
        data = raw if raw is not None else json.dumps(body if body is not None else {})
        return self._request("POST", path, data, extra)

    def get(self, path: str, **extra: Any):
        return self._request("GET", path, None, extra)

    @staticmethod
    def message(text: str | None = "hello", **message: Any) -> dict[str, Any]:
        """A request body holding one message from the agent."""
        message.setdefault("id", unique("m"))
        message.setdefault("sender", "agent")
        if text is not None:
            message.setdefault("text", text)
        return {"message": message}

    def start(self, text: str | None = "hello", *, query: str = "", **message: Any):
        parent = message.pop("parent_conversation_id", None)
        body = self.message(text, **message)
        if parent:
            body["parent_conversation_id"] = parent
        return self.post(query, body)

    def send(
        self, conversation_id: str, text: str | None = "hello", *, query: str = "", **message: Any
    ):
        return self.post(f"/{conversation_id}/messages{query}", self.message(text, **message))

    def read(self, conversation_id: str, query: str = "", **extra: Any):
        return self.get(f"/{conversation_id}/events{query}", **extra)

    def page(
        self, conversation_id: str, *, cursor: str | None = None, wait: float = 0
    ) -> dict[str, Any]:
        """One page of events as JSON (``wait``: a long-poll), which must be a 200."""
        query = f"?wait={wait:g}" + (f"&cursor={cursor}" if cursor else "")
        response = self.read(conversation_id, query)
        assert response.status_code == 200, (response.status_code, response.content[:500])
        page: dict[str, Any] = response.json()
        return page

    def all_events(self, conversation_id: str) -> Events:
        """The first page of the conversation's events, read now."""
        events: Events = self.page(conversation_id)["events"]
        return events

    def events_until(
        self,
        conversation_id: str,
        predicate: Callable[[Events], object],
        *,
        timeout: float = 30.0,
        long_poll: bool | None = None,
    ) -> Events:
        """All events so far, once ``predicate(events)`` holds.

        ``long_poll`` (the default in this process): long-polling from the last cursor;
        otherwise (the default over HTTP) re-reading the log, so that the test holds no
        waiting read of the server it watches.
        """
        if long_poll is None:
            long_poll = self.client is not None
        if not long_poll:
            return eventually(
                lambda: (events,) if predicate(events := self.all_events(conversation_id)) else (),
                timeout=timeout,
                what=f"the events of {conversation_id} to match",
            )[0]
        events: Events = []
        cursor: str | None = None

        def more() -> bool:
            nonlocal cursor
            page = self.page(conversation_id, cursor=cursor, wait=2)
            events.extend(page["events"])
            cursor = page["cursor"]
            return bool(predicate(events))

        try:
            eventually(more, timeout=timeout)
        except AssertionError:
            raise AssertionError(f"timed out; events so far: {events}") from None
        return events

    def settled(self, conversation_id: str, *, timeout: float = 30.0) -> Events:
        """Every event once no turn is running (the last state event is not ``working``)."""

        def idle(events: Events) -> bool:
            states = [e for e in events if e["type"] == "state"]
            return bool(states) and states[-1]["status"] != "working"

        return self.events_until(conversation_id, idle, timeout=timeout)

    def stream(
        self,
        conversation_id: str,
        opened: threading.Event | None = None,
        **headers: str,
    ) -> Iterator[tuple[str | None, str | None, dict[str, Any]]]:
        """(event name or None for a stored event, id, data) for each SSE frame, over HTTP.

        Sets ``opened`` at the stream's opening comment, which the server writes once it is
        listening for the conversation's wake-ups.
        """
        if self.base_url is None:
            raise TypeError("streams are read over HTTP: use at(base_url)")
        url = f"{self.base_url}{ENDPOINT}/{conversation_id}/events"
        import httpx

        from poppy_django.client import iter_sse

        with httpx.stream(
            "GET",
            url,
            headers={**self.http_headers("GET", url), "Accept": "text/event-stream", **headers},
            timeout=httpx.Timeout(HTTP_TIMEOUT, read=HTTP_TIMEOUT),
        ) as response:
            assert response.status_code == 200, response.read()

            def lines() -> Iterator[str]:
                for line in response.iter_lines():
                    if opened is not None and line.startswith(":"):
                        opened.set()
                    yield line

            for frame in iter_sse(lines()):
                name = None if frame.event == "message" else frame.event
                yield name, frame.id, frame.json()


def messages(events: Events) -> list[dict[str, Any]]:
    return [e["message"] for e in events if e["type"] == "message"]


def company_messages(events: Events) -> list[dict[str, Any]]:
    return [m for m in messages(events) if m["role"] == "company"]


def kinds(events: Events) -> list[tuple[Any, ...]]:
    """A compact view: (type, role or status)."""
    out: list[tuple[Any, ...]] = []
    for e in events:
        if e["type"] == "message":
            out.append(("message", e["message"]["role"]))
        elif e["type"] == "state":
            out.append(("state", e["status"], e["responder"]))
        else:
            out.append((e["type"],))
    return out
