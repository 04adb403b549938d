"""``manage.py poppy_chat``: chat with any Poppy endpoint from a terminal, as a personal agent.

``--url`` names the endpoint (default: this project's, from ``POPPY["BASE_URL"]``). With
``--token`` (or ``$POPPY_TOKEN``) the token must be bound to ``--key`` (a PEM of the DPoP key);
without one, the development authority of this project mints a token for a fresh key
(``--user``, ``--account``, ``--scope``). Lines starting with ``/`` are commands: ``/handoff``,
``/close``, ``/signin``, ``/quit``. ``--message`` sends one message, prints the reply and exits.

``--authority`` makes it a personal agent of the authorization server instead: it starts a
Session at the endpoint's origin (``--origin``) as ``--client-id`` with its client key
(``--client-key``, else a new one), renews it as it expires, and ``/signin`` (or
``--sign-in``) signs the User in with Device Sign-In. ``--register`` pre-registers the client
with this project's authority first (its JWKS, so no metadata is fetched); ``--print-jwks``
prints the JWKS to paste into the admin's Clients form for another company.

Interactively, replies (a person's at the desk too) are printed as they arrive, while you
type. When no reply comes for a while the command says what it is waiting for (most often:
no turn worker is running). Needs httpx (the ``client`` extra); ``--stream`` needs an ASGI
server (``runserver`` buffers a streaming response until it ends).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from poppy_django.addresses import DEFAULT_DEV_ORIGIN, endpoint_url
from poppy_django.conf import poppy_settings
from poppy_django.verifier import local_issuer

# The client extra (httpx) is optional: without it the command says which extra to install.
try:
    import httpx

    from poppy_django.client import (
        RESTING_STATES,
        DPoPKey,
        PoppyClient,
        PoppyClientError,
        new_message_id,
    )
    from poppy_django.signin_client import AuthorityClient, ClientIdentity
except ModuleNotFoundError as error:
    if error.name != "httpx":
        raise
    httpx = None  # type: ignore[assignment]


def still_waiting(seconds: float, status: str, responder: str) -> str:
    """What the command says when nothing came for one long-poll, by the conversation's
    state as the read answered it: only a conversation ``working`` waits for a worker."""
    waited = f"[no reply after {seconds:g} s: "
    if status == "queued":
        return waited + "waiting for a person (the handoff is on the support desk's queue)]"
    if responder == "human":
        return waited + "a person holds the conversation; their reply comes when they write]"
    if status == "working":
        return waited + (
            "the conversation is working. Turns run in a worker: with Celery, is "
            "`celery -A <your project> worker` running and reaching the same broker, and does "
            "`manage.py check` pass in the web process's environment?]"
        )
    return waited + f"the conversation is {status}]"


class Command(BaseCommand):
    help = "Chat with a Poppy conversation endpoint as a personal agent."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", help="The endpoint URL (default: this project's).")
        parser.add_argument("--token", help="A DPoP-bound Session Token (or $POPPY_TOKEN).")
        parser.add_argument("--key", help="PEM file of the DPoP key the token is bound to.")
        parser.add_argument("--user", default="chat-user", help="Dev authority: the User.")
        parser.add_argument("--account", help="Dev authority: sign in as this account.")
        parser.add_argument("--scope", action="append", default=[], dest="scopes")
        parser.add_argument("--client-id", help="Dev authority: the client_id (its default).")
        parser.add_argument("--conversation", help="Continue this conversation id.")
        parser.add_argument("--message", help="Send this one message, print the reply, exit.")
        parser.add_argument("--stream", action="store_true", help="Follow replies over SSE.")
        parser.add_argument("--insecure", action="store_true", help="Skip TLS verification.")
        parser.add_argument("--wait", type=float, default=30.0, help="Long-poll seconds.")
        parser.add_argument(
            "--authority",
            action="store_true",
            help="Sign in through the authorization server (Sessions, Device Sign-In).",
        )
        parser.add_argument("--origin", help="--authority: where its metadata is served.")
        parser.add_argument("--client-key", help="--authority: PEM of the client's ES256 key.")
        parser.add_argument(
            "--register",
            action="store_true",
            help="--authority: pre-register the client with this project's authority first.",
        )
        parser.add_argument(
            "--print-jwks", action="store_true", help="Print the client's JWKS and exit."
        )
        parser.add_argument(
            "--sign-in",
            action="store_true",
            help="--authority: sign the User in (Device Sign-In, --scope) before talking.",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=120.0,
            help="--message: give up when no reply came in this many seconds.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if httpx is None:
            raise CommandError(
                "poppy_chat speaks HTTP with httpx, which is not installed: "
                "pip install 'poppy-django[client]'"
            )
        url = options["url"] or self._default_url()
        key = self._key(options["key"])
        token = options["token"] or os.environ.get("POPPY_TOKEN")
        session: _AuthoritySession | None = None
        if options["authority"] or options["print_jwks"]:
            identity = ClientIdentity(options["client_id"], self._client_key(options["client_key"]))
            if options["print_jwks"]:
                self.stdout.write(json.dumps(identity.jwks(), indent=2))
                return
            if options["register"]:
                self._register(identity)
            origin = options["origin"] or _origin(url)
            authority = AuthorityClient(origin, identity, key, verify=not options["insecure"])
            session = _AuthoritySession(authority, options["user"], self.stdout)
            try:
                token = session.start()
                if options["sign_in"]:
                    token = session.sign_in(options["scopes"])
            except PoppyClientError as exc:
                raise CommandError(
                    f"The authority refused: {exc}{_client_fix(exc, options)}"
                ) from exc
        elif not token:
            token = self._development_token(options, key, url)
        chat = _Chat(
            PoppyClient(url, token, key=key, verify=not options["insecure"]),
            self.stdout,
            stream=options["stream"],
            wait=options["wait"],
            timeout=options["timeout"],
            conversation_id=options["conversation"],
            session=session,
        )
        try:
            if options["message"] is not None:
                chat.say(options["message"])
                return
            self.stdout.write(f"Talking to {url}. /handoff, /close, /quit.")
            chat.interactive = True
            if chat.conversation_id is not None:
                chat.follow()  # a continued conversation: show it (and what comes) at once
            for line in _lines(sys.stdin):
                if line in ("/quit", "/exit"):
                    return
                chat.command(line) if line.startswith("/") else chat.say(line)
                chat.rethrow()
            chat.drain()  # input ended (a pipe): the last reply is printed before exiting
            chat.rethrow()
        except PoppyClientError as exc:
            raise CommandError(str(exc)) from exc
        except httpx.TransportError as exc:
            raise CommandError(
                f"Could not reach {exc.request.url}: {exc or type(exc).__name__}. Is the server "
                "running there? (--url names another endpoint.)"
            ) from exc
        finally:
            chat.stop()

    def _development_token(self, options: dict[str, Any], key: DPoPKey, url: str) -> str:
        """A token from the issuer app's development mode (``poppy_django.authority``)."""
        local = local_issuer.registered()
        if local is None:
            raise CommandError(
                "Give --token: no issuer in this project mints development tokens (add "
                '"poppy_django.authority" to INSTALLED_APPS and set POPPY["DEV_AUTHORITY"]).'
            )
        extra = {"client_id": options["client_id"]} if options["client_id"] else {}
        try:
            return local.mint_development_token(
                user=options["user"],
                account=options["account"],
                scopes=options["scopes"],
                jkt=key.thumbprint,
                audience=url,
                **extra,
            )
        except ImproperlyConfigured as exc:
            raise CommandError(f"Give --token: {exc}") from exc

    def _default_url(self) -> str:
        base = poppy_settings.BASE_URL or DEFAULT_DEV_ORIGIN
        return endpoint_url(base)

    def _client_key(self, path: str | None) -> ec.EllipticCurvePrivateKey:
        if not path:
            return ec.generate_private_key(ec.SECP256R1())
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise CommandError("--client-key must be an EC P-256 private key (PEM).")
        return key

    def _register(self, identity: ClientIdentity) -> None:
        """Pre-register the client as staff would on the admin's Clients form: registered,
        allowed, with its JWKS stored, so the authority never fetches its metadata."""
        local = local_issuer.registered()
        if local is None or local.register_client is None:
            raise CommandError("--register needs poppy_django.authority in INSTALLED_APPS.")
        local.register_client(identity.client_id, identity.jwks(), "poppy_chat")
        self.stdout.write(f"[registered {identity.client_id} with this project's authority]")

    def _key(self, path: str | None) -> DPoPKey:
        if not path:
            return DPoPKey()
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise CommandError("--key must be an EC P-256 private key (PEM).")
        return DPoPKey(key)


def _client_fix(exc: PoppyClientError, options: dict[str, Any]) -> str:
    """What to do when the authority does not know this client's key (``invalid_client``)."""
    if exc.error != "invalid_client" or options["register"]:
        return ""
    if options["client_key"] is None:
        return (
            ". poppy_chat made a new client key for this run, which the authority does not "
            "know: add --register to register this one, or pass the key registered before "
            "with --client-key <PEM file>."
        )
    return (
        ". The authority does not know this client with this key: add --register to "
        "register it (or --client-key the key registered before)."
    )


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class _AuthoritySession:
    """The personal agent's Session at the authority: started, renewed before it expires,
    signed in with Device Sign-In."""

    #: Renew when less than this share of the token's lifetime is left.
    RENEW_AT = 0.2

    def __init__(self, authority: AuthorityClient, user: str, out: Any) -> None:
        self.authority = authority
        self.user = user
        self.out = out
        self.session_id = ""
        self.token = ""
        self._expires_at = 0.0
        self._lifetime = 0.0

    def _take(self, answer: dict[str, Any]) -> str:
        self.session_id = str(answer["session_id"])
        self.token = str(answer["access_token"])
        self._lifetime = float(answer.get("expires_in", 300))
        self._expires_at = time.monotonic() + self._lifetime
        return self.token

    def start(self) -> str:
        token = self._take(self.authority.start_session(self.user))
        self.out.write(
            f"[Session {self.session_id} started at {self.authority.issuer}, signed out]"
        )
        return token

    def current(self) -> str:
        """The token to send now: renewed (same Session) when it is about to expire."""
        if time.monotonic() > self._expires_at - self.RENEW_AT * self._lifetime:
            self._take(self.authority.renew(self.user, self.session_id))
        return self.token

    def sign_in(self, scopes: list[str]) -> str:
        started = self.authority.begin_device_sign_in(scopes or ["poppy:read"])
        link = started.verification_uri_complete or started.verification_uri
        self.out.write(f"[to sign in, open {link} and enter the code {started.user_code}]")
        self.out.flush()
        answer = self.authority.wait_for_device_sign_in(started, self.session_id)
        token = self._take(answer)
        self.out.write(f"[signed in; scope: {answer.get('scope') or '(none)'}]")
        self.out.flush()
        return token


def _lines(stream: TextIO) -> Iterator[str]:
    while True:
        try:
            line = input("you> ") if stream.isatty() else stream.readline()
        except EOFError:
            return
        if not stream.isatty() and line == "":
            return
        line = line.strip()
        if line:
            yield line


class _Chat:
    """One conversation: sends, then shows events until the company side rests."""

    def __init__(
        self,
        client: PoppyClient,
        out: Any,
        *,
        stream: bool,
        wait: float,
        timeout: float,
        conversation_id: str | None,
        session: _AuthoritySession | None = None,
    ) -> None:
        self.client = client
        #: With --authority: the Session whose (renewed) token each request carries.
        self.session = session
        #: Who answered last (agent or human): a person handing back is said.
        self.responder = "agent"
        self.out = out
        self.stream = stream
        self.wait = wait
        self.timeout = timeout
        self.conversation_id = conversation_id
        self.cursor: str | None = None
        self.status = "working"
        #: Interactive: a reader thread prints events as they come, while the User types.
        self.interactive = False
        self._reader: threading.Thread | None = None
        self._stopping = threading.Event()
        self._failure: BaseException | None = None
        self._lock = threading.Lock()
        #: The id of the message sent last, until its event is shown: states before it are
        #: the previous turn's, so they do not say the company side rests.
        self._awaiting: str | None = None

    def _fresh_token(self) -> None:
        if self.session is not None:
            self.client.token = self.session.current()

    def say(self, text: str) -> None:
        self._fresh_token()
        message_id = new_message_id()
        with self._lock:
            self.status = "working"  # until the events after this message say otherwise
            self._awaiting = message_id
        try:
            if self.conversation_id is None:
                answer = self.client.start(text, message_id=message_id)
                self.conversation_id = str(answer["conversation_id"])
                self.out.write(f"[conversation {self.conversation_id}]")
                self.out.flush()
            else:
                self.client.send(self.conversation_id, text, message_id=message_id)
        except BaseException:
            with self._lock:
                self._awaiting = None  # refused: no turn follows it
            raise
        self.follow()

    def rethrow(self) -> None:
        """Raise what stopped the reader thread (the server went away, a refused read)."""
        if self._failure is not None:
            raise self._failure

    def drain(self) -> None:
        """Wait (at most ``--timeout``) for the company side to rest, while the reader reads."""
        deadline = time.monotonic() + self.timeout
        while (
            self._reader is not None
            and self._reader.is_alive()
            and self.status not in RESTING_STATES
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)

    def stop(self) -> None:
        """End the session; the reader (a daemon thread in a long-poll) is not waited for."""
        self._stopping.set()
        self.client.http.close()

    def command(self, line: str) -> None:
        if line.startswith("/signin"):
            if self.session is None:
                self.out.write("/signin needs --authority (a Session at the authority).")
                return
            self.client.token = self.session.sign_in(line.split()[1:])
            return
        self._fresh_token()
        if self.conversation_id is None:
            self.out.write("No conversation yet: say something first.")
            return
        if line == "/handoff":
            answer = self.client.handoff(self.conversation_id)
        elif line == "/close":
            answer = self.client.close(self.conversation_id)
        else:
            self.out.write("Commands: /handoff, /close, /signin [scopes], /quit.")
            return
        self.out.write(f"[{answer.get('status')}/{answer.get('responder')}]")
        self.out.flush()
        self.follow()

    def follow(self) -> None:
        """Show what comes: until the company side rests, or for ever in the background."""
        assert self.conversation_id is not None
        if self.interactive and not self.stream:
            if self._reader is None:
                self._reader = threading.Thread(target=self._read_on, daemon=True)
                self._reader.start()
            return
        if self.stream:
            self._follow_stream()
            return
        waited = 0.0
        while True:
            started = time.monotonic()
            resting = self._poll()
            waited = 0.0 if resting is not None else waited + time.monotonic() - started
            if resting:
                return
            if resting is None and waited >= self.timeout:
                raise CommandError(f"No reply in {self.timeout:g} s; giving up.")

    def _poll(self) -> bool | None:
        """One long-poll: whether the company side rests (None: nothing came)."""
        assert self.conversation_id is not None
        self._fresh_token()
        page = self.client.events(self.conversation_id, self.cursor, self.wait)
        with self._lock:
            self.cursor = page.get("cursor") or self.cursor
            if not page.get("events"):
                if self.status not in RESTING_STATES:
                    status = str(page.get("status") or self.status)
                    responder = str(page.get("responder") or self.responder)
                    self.out.write(still_waiting(self.wait, status, responder))
                    self.out.flush()
                return None
            resting = False
            for event in page.get("events", []):
                state = self.show(event)
                resting = resting if state is None else state
            self.out.flush()  # the reader thread's lines show at once, even through a pipe
            return resting

    def _read_on(self) -> None:
        """The interactive reader: long-polls until ``/quit``, printing each event."""
        try:
            while not self._stopping.is_set():
                if self._poll() is None and self.status == "closed":
                    return
        except BaseException as exc:  # handed to the main thread, which says it
            if not self._stopping.is_set():
                self._failure = exc
                self.out.write(f"[stopped reading: {exc}]")

    def _follow_stream(self) -> None:
        assert self.conversation_id is not None
        streamed = ""  # the pieces of the reply printed so far
        for frame in self.client.stream(self.conversation_id, self.cursor, reconnect=False):
            if frame.event == "text-delta":
                piece = frame.json().get("text", "")
                self.out.write(piece, ending="")
                self.out.flush()
                streamed += piece
                continue
            if frame.id is not None:
                self.cursor = frame.id
            event = frame.json()
            if streamed and event.get("type") == "message":
                self.out.write("")
                # Deltas are a preview and may be partial (the stream opened mid-reply):
                # the complete message is what was said.
                complete = (event.get("message") or {}).get("text") or ""
                if complete != streamed:
                    self.show(event)
                streamed = ""
                continue
            if self.show(event):
                return

    def show(self, event: dict[str, Any]) -> bool | None:
        """Print one event; for a state, whether the company side rests (None: no state)."""
        kind = event.get("type")
        if kind == "message":
            message = event.get("message") or {}
            if message.get("id") == self._awaiting:
                self._awaiting = None
            if message.get("role") == "company":
                text = message.get("text") or ""
                data = message.get("data")
                self.out.write(f"{message.get('sender', 'agent')}> {text}")
                if data:
                    self.out.write(f"  data: {json.dumps(data, sort_keys=True)}")
        elif kind == "state":
            status = str(event.get("status"))
            if status == "queued":
                self.out.write("[waiting for a person]")
            elif event.get("responder") == "human" and status == "idle":
                self.out.write("[a person has joined]")
            elif status == "closed":
                self.out.write("[closed]")
            elif event.get("responder") == "agent" and self.responder == "human":
                self.out.write("[the person handed the conversation back to the Company Agent]")
            self.responder = str(event.get("responder") or self.responder)
            if self._awaiting is not None:  # the previous turn's state
                return False
            self.status = status
            return status in RESTING_STATES
        elif kind == "authorization":
            scope = f" ({event['scope']})" if event.get("scope") else ""
            hint = "/signin and continue" if self.session else "get a new token and continue"
            self.out.write(f"[{event.get('error')}{scope}: {hint}]")
            return True
        elif kind:
            self.out.write(f"[{kind}: {json.dumps(event)}]")
        return None
