"""A small personal-agent client for any Poppy conversation endpoint (sync, httpx).

It generates its own DPoP key, signs a fresh proof per request (with ``ath`` when it holds a
token), retries once when the server asks for a nonce, and speaks the wire contract:
start / send / events (cursor, ``wait``) / handoff / close, and :meth:`PoppyClient.stream`,
which follows the SSE stream and resumes with ``Last-Event-ID``. Used by ``make demo``, the
``poppy_chat`` command, the docs and the tests. Needs ``httpx`` (the ``client`` extra).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

try:
    import httpx
except ModuleNotFoundError as error:  # the client extra is not installed
    raise ModuleNotFoundError(
        "poppy_django.client needs httpx: pip install 'poppy-django[client]'", name="httpx"
    ) from error
import jwt
from cryptography.hazmat.primitives.asymmetric import ec

from poppy_django.verifier.jwk import b64url, public_jwk, thumbprint

USER_AGENT = "poppy-django-client/0.1"
#: States after which no more events come without a new message from the personal agent.
RESTING_STATES = frozenset({"idle", "queued", "closed"})


class PoppyClientError(Exception):
    """A non-2xx answer: its status, the wire ``error`` code and description, the body."""

    def __init__(self, status: int, error: str, description: str | None, body: Any) -> None:
        super().__init__(f"{status} {error}" + (f": {description}" if description else ""))
        self.status = status
        self.error = error
        self.description = description
        self.body = body


class DPoPKey:
    """An EC P-256 DPoP key pair: its public JWK, RFC 7638 thumbprint and proofs."""

    def __init__(self, private_key: ec.EllipticCurvePrivateKey | None = None) -> None:
        self.private_key = private_key or ec.generate_private_key(ec.SECP256R1())
        self.public_jwk = public_jwk(self.private_key.public_key())
        self.thumbprint = thumbprint(self.public_jwk)

    def proof(
        self,
        method: str,
        url: str,
        *,
        access_token: str | None = None,
        nonce: str | None = None,
        now: float | None = None,
    ) -> str:
        """A fresh DPoP proof for one request (``htu`` without query and fragment)."""
        parts = urlsplit(url)
        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(16),
            "htm": method.upper(),
            "htu": urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")),
            "iat": int(time.time() if now is None else now),
        }
        if access_token is not None:
            claims["ath"] = b64url(hashlib.sha256(access_token.encode("ascii")).digest())
        if nonce is not None:
            claims["nonce"] = nonce
        headers = {"typ": "dpop+jwt", "jwk": self.public_jwk}
        return jwt.encode(claims, self.private_key, algorithm="ES256", headers=headers)


@dataclass
class SSEFrame:
    """One dispatched server-sent event. ``id`` is None when the frame had no ``id:`` line."""

    event: str = "message"
    data: str = ""
    id: str | None = None

    def json(self) -> Any:
        return json.loads(self.data)


def iter_sse(lines: Iterable[str]) -> Iterator[SSEFrame]:
    """Parse ``text/event-stream`` lines (without their line endings) into frames.

    As the HTML standard says: ``:`` lines are comments (keep-alives), a field's value loses
    one leading space, ``data`` lines join with newlines, a blank line dispatches, and a
    block without data dispatches nothing.
    """
    event, frame_id = "", None
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield SSEFrame(event=event or "message", data="\n".join(data), id=frame_id)
            event, data, frame_id = "", [], None
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\x00" not in value:
            frame_id = value
        # "retry" and unknown fields are ignored: the client reconnects at once.


def new_message_id() -> str:
    """A message id in the wire's alphabet."""
    return "pa_" + secrets.token_urlsafe(12)


def _message(
    text: str | None,
    data: Mapping[str, Any] | None,
    context: Mapping[str, Any] | None,
    message_id: str | None,
    sender: str,
) -> dict[str, Any]:
    message: dict[str, Any] = {"id": message_id or new_message_id(), "sender": sender}
    if text is not None:
        message["text"] = text
    if data is not None:
        message["data"] = dict(data)
    if context is not None:
        message["context"] = dict(context)
    return message


class PoppyClient:
    """A personal agent talking to one endpoint for one User (one token at a time).

    ``token`` may be replaced (e.g. after the User signs in); the DPoP key stays, so a new
    token must be bound to :attr:`key`'s thumbprint.
    """

    def __init__(
        self,
        endpoint: str,
        token: str | None = None,
        *,
        key: DPoPKey | None = None,
        http: httpx.Client | None = None,
        timeout: float = 60.0,
        verify: bool = True,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.token = token
        self.key = key or DPoPKey()
        self.nonce: str | None = None
        self.http = http or httpx.Client(
            timeout=timeout, verify=verify, headers={"User-Agent": USER_AGENT}
        )

    def __enter__(self) -> PoppyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    # -- HTTP with DPoP --------------------------------------------------------------------

    def _headers(self, method: str, url: str) -> dict[str, str]:
        headers = {"DPoP": self.key.proof(method, url, access_token=self.token, nonce=self.nonce)}
        if self.token is not None:
            headers["Authorization"] = f"DPoP {self.token}"
        return headers

    def send_request(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        stream: bool = False,
    ) -> httpx.Response:
        """One request with a fresh proof; once more with the server's nonce if it asks."""
        for attempt in (1, 2):
            request = self.http.build_request(
                method,
                url,
                json=json_body,
                params={k: v for k, v in (params or {}).items() if v is not None},
                headers={**(headers or {}), **self._headers(method, url)},
            )
            response = self.http.send(request, stream=stream)
            nonce = response.headers.get("DPoP-Nonce")
            if nonce:
                self.nonce = nonce
            asks_nonce = 'error="use_dpop_nonce"' in response.headers.get("WWW-Authenticate", "")
            if response.status_code == 401 and asks_nonce and nonce and attempt == 1:
                response.close()
                continue
            return response
        raise AssertionError("unreachable")

    def _answer(self, response: httpx.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code >= 400:
            error = body.get("error") if isinstance(body, dict) else None
            description = body.get("error_description") if isinstance(body, dict) else None
            raise PoppyClientError(
                response.status_code, str(error or "http_error"), description, body
            )
        if not isinstance(body, dict):
            raise PoppyClientError(response.status_code, "invalid_response", None, body)
        return body

    def _call(
        self, method: str, path: str, body: Any = None, params: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        url = self.endpoint + path
        response = self.send_request(method, url, json_body=body, params=params)
        return self._answer(response)

    # -- the wire --------------------------------------------------------------------------

    def start(
        self,
        text: str | None = None,
        *,
        data: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        message_id: str | None = None,
        sender: str = "agent",
        parent_conversation_id: str | None = None,
        wait: float | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """``POST {endpoint}``: a new conversation (a Direct Conversation with a parent)."""
        body: dict[str, Any] = {"message": _message(text, data, context, message_id, sender)}
        if parent_conversation_id is not None:
            body["parent_conversation_id"] = parent_conversation_id
        return self._call("POST", "", body, {"wait": wait, "cursor": cursor})

    def send(
        self,
        conversation_id: str,
        text: str | None = None,
        *,
        data: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        message_id: str | None = None,
        sender: str = "agent",
        wait: float | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """``POST {endpoint}/{id}/messages``."""
        body = {"message": _message(text, data, context, message_id, sender)}
        return self._call(
            "POST", f"/{conversation_id}/messages", body, {"wait": wait, "cursor": cursor}
        )

    def events(
        self, conversation_id: str, cursor: str | None = None, wait: float | None = None
    ) -> dict[str, Any]:
        """``GET {endpoint}/{id}/events`` as JSON, from ``cursor``, long-polling ``wait`` s."""
        return self._call(
            "GET", f"/{conversation_id}/events", None, {"cursor": cursor, "wait": wait}
        )

    def handoff(self, conversation_id: str) -> dict[str, Any]:
        """``POST {endpoint}/{id}/handoff``: ask for a person."""
        return self._call("POST", f"/{conversation_id}/handoff", {})

    def close(self, conversation_id: str) -> dict[str, Any]:
        """``POST {endpoint}/{id}/close``."""
        return self._call("POST", f"/{conversation_id}/close", {})

    def stream(
        self,
        conversation_id: str,
        last_event_id: str | None = None,
        *,
        reconnect: bool = True,
        max_empty_connections: int = 3,
    ) -> Iterator[SSEFrame]:
        """Follow ``GET .../events`` as SSE, resuming after ``last_event_id``.

        Yields every frame (``text-delta`` frames have no id). Reconnects at once when a
        stream ends, with ``Last-Event-ID``; stops after the ``closed`` state event, or after
        ``max_empty_connections`` connections in a row that brought no event.
        """
        url = f"{self.endpoint}/{conversation_id}/events"
        empty = 0
        while True:
            headers = {"Accept": "text/event-stream"}
            if last_event_id is not None:
                headers["Last-Event-ID"] = last_event_id
            response = self.send_request("GET", url, headers=headers, stream=True)
            got_event = False
            try:
                if response.status_code >= 400:
                    response.read()
                    self._answer(response)
                for frame in iter_sse(response.iter_lines()):
                    if frame.id is not None:
                        last_event_id = frame.id
                        got_event = True
                    yield frame
                    if frame.id is not None and _is_closed(frame):
                        return
            finally:
                response.close()
            empty = 0 if got_event else empty + 1
            if not reconnect or empty >= max_empty_connections:
                return


def _is_closed(frame: SSEFrame) -> bool:
    try:
        event = frame.json()
    except ValueError:
        return False
    return (
        isinstance(event, dict) and event.get("type") == "state" and event.get("status") == "closed"
    )
